// The ring's writers and lock-free readers, and the straggler statistics.
#include "trace/recorder.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace chorus::trace {

const char* toString(CallState s) {
  switch (s) {
    case CallState::kQueued:
      return "queued";
    case CallState::kStarted:
      return "started";
    case CallState::kWaiting:
      return "waiting";
    case CallState::kDone:
      return "done";
    case CallState::kFailed:
      return "failed";
  }
  return "unknown";
}

int lagBucket(uint64_t lag) {
  if (lag == 0) return 0;
  const int msb = 63 - __builtin_clzll(lag);
  const uint64_t frac = msb >= 2 ? (lag >> (msb - 2)) & 3 : (lag << (2 - msb)) & 3;
  return std::min(1 + msb * 4 + static_cast<int>(frac), kLagBuckets - 1);
}

uint64_t lagOfBucket(int bucket) {
  if (bucket <= 0) return 0;
  const int msb = (bucket - 1) / 4;
  const int frac = (bucket - 1) % 4;
  const double low = std::ldexp(1.0 + frac / 4.0, msb);
  const double high = std::ldexp(1.0 + (frac + 1) / 4.0, msb);
  return static_cast<uint64_t>(std::llround((low + high) / 2 - 0.5));
}

// A power of two, so that the slot of a call is a mask of its id: a division costs 10-40 cycles,
// and the hot path looked up a slot five times per call.
static size_t ringCapacity(size_t asked) { return asked == 0 ? 0 : std::bit_ceil(asked); }

Recorder::Recorder(size_t capacity, int rank, int size, double detailMicros)
    : capacity_(ringCapacity(capacity)),
      mask_(capacity_ - 1),
      detailGap_(capacity_ > 0 && detailMicros > 0 ? roughTicksOf(detailMicros) : 0),
      rank_(rank),
      size_(size) {
  if (capacity_ == 0) return;
  startTickClock();
  const auto n = static_cast<size_t>(size);
  ring_ = std::make_unique<Entry[]>(capacity_);
  lastCount_ = std::make_unique<std::atomic<uint64_t>[]>(n);
  lagSamples_ = std::make_unique<std::atomic<uint64_t>[]>(n);
  lagHist_ = std::make_unique<std::atomic<uint32_t>[]>(n * kLagBuckets);
}

uint64_t Recorder::startedTicks(uint64_t id) const {
  if (id == 0 || capacity_ == 0) return 0;
  const Entry& e = ring_[(id - 1) & mask_];
  const uint64_t t = e.startedAt.load(std::memory_order_relaxed);
  return e.version.load(std::memory_order_acquire) == 2 * id ? t : 0;
}

void Recorder::dropQueued(uint64_t id, uint64_t now) {
  if (id != 0 && deferredId_ == id) writeDeferred(now, false);
  Entry* e = entryOf(id);
  if (e == nullptr) return;
  e->endedAt.store(now, std::memory_order_relaxed);
  e->state.store(static_cast<uint8_t>(CallState::kFailed), std::memory_order_relaxed);
}

bool Recorder::copy(const Entry& e, EntryCopy* out, const WallClock& clock) const {
  constexpr auto r = std::memory_order_relaxed;
  for (int tries = 0; tries < 64; ++tries) {
    const uint64_t v1 = e.version.load(std::memory_order_acquire);
    if (v1 & 1) continue;
    out->id = v1 / 2;
    out->number = e.number.load(r);
    out->kind = static_cast<CollectiveKind>(e.kind.load(r));
    out->algo = static_cast<AlgorithmId>(e.algo.load(r));
    out->dtype = static_cast<DataType>(e.dtype.load(r));
    out->op = static_cast<ReduceOp>(e.op.load(r));
    out->wire = static_cast<WireFormat>(e.wire.load(r));
    out->state = static_cast<CallState>(e.state.load(r));
    out->root = e.root.load(r);
    out->waitingOn = e.waitingOn.load(r);
    out->count = e.count.load(r);
    out->bytes = out->count * sizeOf(out->dtype);  // send_recv: count bytes of u8
    out->issuedUs = clock.micros(e.issuedAt.load(r));
    out->startedUs = clock.micros(e.startedAt.load(r));
    out->endedUs = clock.micros(e.endedAt.load(r));
    out->started = out->startedUs != 0;
    out->detailed = e.detailed.load(r) != 0;
    out->peerCount = std::min<int>(e.peerCount.load(std::memory_order_acquire), kPeerSlots);
    for (int i = 0; i < out->peerCount; ++i) {
      const PeerSlot& s = e.peers[i];
      out->peers[i] = {s.rank.load(r), s.sent.load(r), s.received.load(r),
                       clock.micros(s.firstArrivalAt.load(r))};
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.version.load(r) == v1) return true;
  }
  return false;
}

bool Recorder::callTicks(uint64_t id, CallTicks* out) const {
  if (id == 0 || capacity_ == 0) return false;
  const Entry& e = ring_[(id - 1) & mask_];
  constexpr auto r = std::memory_order_relaxed;
  for (int tries = 0; tries < 64; ++tries) {
    const uint64_t v = e.version.load(std::memory_order_acquire);
    if (v != 2 * id) return false;
    CallTicks c;
    c.number = e.number.load(r);
    c.kind = static_cast<CollectiveKind>(e.kind.load(r));
    c.state = static_cast<CallState>(e.state.load(r));
    c.issuedAt = e.issuedAt.load(r);
    c.startedAt = e.startedAt.load(r);
    c.endedAt = e.endedAt.load(r);
    c.lastArrivalAt = c.startedAt;
    const int n = std::min<int>(e.peerCount.load(std::memory_order_acquire), kPeerSlots);
    for (int i = 0; i < n; ++i) {
      const PeerSlot& s = e.peers[i];
      const uint64_t t = s.firstArrivalAt.load(r);
      if (t != 0 && !s.early.load(r) && t > c.lastArrivalAt) {
        c.lastArrivalAt = t;
        c.lastPeer = s.rank.load(r);
      }
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.version.load(r) == v) {
      *out = c;
      return true;
    }
  }
  return false;
}

std::vector<EntryCopy> Recorder::entries(const WallClock& clock) const {
  std::vector<EntryCopy> out;
  if (capacity_ == 0) return out;
  const uint64_t n = recorded();
  const uint64_t first = n > capacity_ ? n - capacity_ + 1 : 1;
  out.reserve(static_cast<size_t>(n - first + 1));
  for (uint64_t id = first; id <= n; ++id) {
    EntryCopy c;
    // An entry being rewritten, or already holding a newer call, is left out.
    if (copy(ring_[(id - 1) & mask_], &c, clock) && c.id == id) out.push_back(c);
  }
  return out;
}

bool Recorder::oldestPending(EntryCopy* out, const WallClock& clock) const {
  if (capacity_ == 0) return false;
  const uint64_t n = recorded();
  const uint64_t first = n > capacity_ ? n - capacity_ + 1 : 1;
  for (uint64_t id = first; id <= n; ++id) {
    EntryCopy c;
    if (!copy(ring_[(id - 1) & mask_], &c, clock) || c.id != id) continue;
    if (c.state != CallState::kDone) {
      *out = c;
      return true;
    }
  }
  return false;
}

StragglerCopy Recorder::stragglers(const WallClock& clock) const {
  StragglerCopy s;
  if (capacity_ == 0) return s;
  constexpr auto r = std::memory_order_relaxed;
  s.collectives = statCalls_.load(r);
  for (int q = 0; q < size_; ++q) {
    const auto qi = static_cast<size_t>(q);
    StragglerCopy::Rank row;
    row.rank = q;
    row.last = lastCount_[qi].load(r);
    if (row.last == 0) continue;
    row.lagSamples = lagSamples_[qi].load(r);
    uint64_t total = 0;
    uint32_t hist[kLagBuckets];
    for (int b = 0; b < kLagBuckets; ++b) {
      hist[b] = lagHist_[qi * kLagBuckets + static_cast<size_t>(b)].load(r);
      total += hist[b];
    }
    auto quantile = [&](double p) -> uint64_t {
      if (total == 0) return 0;
      const auto rank = static_cast<uint64_t>(std::ceil(p * static_cast<double>(total)));
      uint64_t seen = 0;
      for (int b = 0; b < kLagBuckets; ++b) {
        seen += hist[b];
        if (seen >= std::max<uint64_t>(rank, 1)) {
          return static_cast<uint64_t>(clock.microsOf(static_cast<double>(lagOfBucket(b))));
        }
      }
      return static_cast<uint64_t>(
          clock.microsOf(static_cast<double>(lagOfBucket(kLagBuckets - 1))));
    };
    row.medianLagUs = quantile(0.5);
    row.p99LagUs = quantile(0.99);
    s.ranks.push_back(row);
  }
  return s;
}

}  // namespace chorus::trace
