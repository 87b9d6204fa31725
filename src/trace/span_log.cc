#include "trace/span_log.h"

namespace chorus::trace {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

template <typename T>
uint64_t word(T v) {
  return static_cast<uint64_t>(static_cast<int64_t>(v));
}

}  // namespace

const char* toString(SpanKind k) { return k == SpanKind::kBucket ? "bucket" : "compute"; }

SpanLog::~SpanLog() { delete[] ring_.load(std::memory_order_acquire); }

void SpanLog::add(const SpanRecord& s) {
  if (capacity_ == 0) return;
  Slot* ring = ring_.load(std::memory_order_acquire);
  if (ring == nullptr) {  // single writer: nobody else allocates
    ring = new Slot[capacity_];
    ring_.store(ring, std::memory_order_release);
  }
  const uint64_t n = added_.load(kRelaxed) + 1;
  Slot& slot = ring[(n - 1) % capacity_];
  slot.version.store(2 * n - 1, kRelaxed);
  std::atomic_thread_fence(std::memory_order_release);
  const uint64_t words[kWords] = {word(s.kind),    word(s.step),    word(s.index), word(s.call),
                                  s.bytes,         s.startAt,       s.endAt,       s.waitTicks,
                                  s.transferTicks, word(s.lastPeer)};
  for (int i = 0; i < kWords; ++i) slot.words[i].store(words[i], kRelaxed);
  slot.version.store(2 * n, std::memory_order_release);
  added_.store(n, std::memory_order_release);
}

std::vector<SpanRecord> SpanLog::spans() const {
  std::vector<SpanRecord> out;
  const uint64_t n = added();
  const Slot* ring = ring_.load(std::memory_order_acquire);
  if (ring == nullptr || n == 0) return out;
  const uint64_t first = n > capacity_ ? n - capacity_ + 1 : 1;
  out.reserve(static_cast<size_t>(n - first + 1));
  for (uint64_t id = first; id <= n; ++id) {
    const Slot& slot = ring[(id - 1) % capacity_];
    for (int tries = 0; tries < 64; ++tries) {
      const uint64_t v = slot.version.load(std::memory_order_acquire);
      if (v != 2 * id) break;  // being rewritten, or already holding a newer span: left out
      uint64_t w[kWords];
      for (int i = 0; i < kWords; ++i) w[i] = slot.words[i].load(kRelaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (slot.version.load(kRelaxed) != v) continue;
      SpanRecord s;
      s.kind = static_cast<SpanKind>(w[0]);
      s.step = static_cast<int64_t>(w[1]);
      s.index = static_cast<int32_t>(static_cast<int64_t>(w[2]));
      s.call = static_cast<int64_t>(w[3]);
      s.bytes = w[4];
      s.startAt = w[5];
      s.endAt = w[6];
      s.waitTicks = w[7];
      s.transferTicks = w[8];
      s.lastPeer = static_cast<int32_t>(static_cast<int64_t>(w[9]));
      out.push_back(s);
      break;
    }
  }
  return out;
}

}  // namespace chorus::trace
