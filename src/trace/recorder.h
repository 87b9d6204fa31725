// The flight recorder of one communicator: a fixed ring of its most recent calls, written by the
// thread that issues or drives a call and read at any time by another (a dump, the progress
// publisher) without locks. Recording never allocates: the ring, the per-peer lookup of the call
// in progress and the straggler statistics are sized at creation (docs/trace-format.md).
#pragma once

#include "common/op_desc.h"
#include "trace/clock.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chorus::trace {

enum class CallState : uint8_t { kQueued, kStarted, kWaiting, kDone, kFailed };
const char* toString(CallState s);

// Peers remembered per call: the first ones the call exchanged data with (a ring talks to two,
// recursive doubling to log2(size)); the traffic of further peers is not recorded.
inline constexpr int kPeerSlots = 8;
// A small call that runs at once on the thread that issued it is stamped when it first waits for
// a peer (or at its end if it never does) rather than at its start: the clock read then falls in
// time the rank spends waiting anyway. The stamp is late by the time the call takes to post its
// first messages, well under a microsecond below this size.
inline constexpr uint64_t kStampAtFirstWaitBelowBytes = 64 << 10;
// Such a call also takes its end time from the last clock reading it made (its start or the
// first message of its last peer) rather than reading the clock again: the end follows that
// message by the time to reduce and return a few bytes, and one clock read (12 ns on the test
// machines' hypervisor) is about 1.5% of an 8-byte shared-memory all-reduce.
inline constexpr uint64_t kEndAtLastStamp = 0;
// And when it is not followed in detail, its entry is written then too (at its first wait, or
// at its end if it never waits), not at its issue: stores made before the call's first message
// delay that message, because a core makes its stores visible in program order, and a few
// dozen of them cost an 8-byte shared-memory all-reduce about 2%. Until then the call is
// counted (recorded(), issued()) but has no entry; it cannot stall before its first wait, and a
// failure before it writes the entry first (Recorder::settle).
// Lag histogram: four buckets per power of two of ticks, up to about 2^49 ticks (days).
inline constexpr int kLagBuckets = 200;

// Detail: a call's per-peer traffic and arrivals (the transport's part of the recording, most of
// its cost on a small call). Every call that reads the clock at its start anyway (large,
// non-blocking, point-to-point) is followed in detail, and so is a small blocking call whose
// previous call ended at least the detail interval (CHORUS_TRACE_DETAIL_US) after the last
// detailed call started; the others record their issue, start, waits and end only. So detailed
// small calls start at least an interval apart, which bounds the cost as a fraction of time: a
// tight loop of microsecond calls has about one per interval, while a rank that waits for its
// peers has every call detailed, and one that finds them there every other (docs/trace-format.md).

// Laid out so that a call with two peers touches two cache lines of the ring.
struct PeerSlot {
  std::atomic<int32_t> rank{-1};
  std::atomic<bool> early{false};  // its first message was there before this rank looked
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> firstArrivalAt{0};  // ticks (trace/clock.h)
};

struct alignas(64) Entry {
  // 2 x the call's id (1 + its position among all calls recorded) once written; odd while the
  // entry is (re)initialised for a new call, 0 while unused. A reader that sees it change while
  // copying the entry copies again.
  std::atomic<uint64_t> version{0};
  std::atomic<uint64_t> number{0};
  std::atomic<uint64_t> count{0};                               // bytes: count x element size
  std::atomic<uint64_t> issuedAt{0}, startedAt{0}, endedAt{0};  // ticks (trace/clock.h)
  std::atomic<int32_t> root{-1}, waitingOn{-1};
  std::atomic<uint8_t> kind{0}, algo{0}, dtype{0}, op{0}, wire{0};
  std::atomic<uint8_t> state{0};
  std::atomic<uint8_t> peerCount{0};
  std::atomic<uint8_t> detailed{1};  // 0: per-peer traffic and arrivals not followed (Detail)
  PeerSlot peers[kPeerSlots];
};

// A copy of an entry, for the readers.
struct EntryCopy {
  uint64_t id = 0, number = 0;
  CollectiveKind kind = CollectiveKind::kBarrier;
  AlgorithmId algo = AlgorithmId::kNone;
  bool started = false;  // algo is meaningful
  DataType dtype = DataType::kU8;
  ReduceOp op = ReduceOp::kSum;
  WireFormat wire = WireFormat::kNative;  // an all-reduce's wire format (CallOptions)
  CallState state = CallState::kQueued;
  bool detailed = true;  // peers were followed (else the list is empty)
  int32_t root = -1, waitingOn = -1;
  uint64_t count = 0, bytes = 0, issuedUs = 0, startedUs = 0, endedUs = 0;
  struct Peer {
    int32_t rank;
    uint64_t sent, received, firstArrivalUs;
  };
  int peerCount = 0;
  Peer peers[kPeerSlots];
};

// One call's times as the layers above read them (ticks, trace/clock.h).
struct CallTicks {
  uint64_t number = 0;
  CollectiveKind kind = CollectiveKind::kBarrier;
  CallState state = CallState::kQueued;
  uint64_t issuedAt = 0, startedAt = 0, endedAt = 0;
  // The first arrival of the peer that came last; startedAt when every peer heard from was there
  // before this rank started, or when none was heard from.
  uint64_t lastArrivalAt = 0;
  int32_t lastPeer = -1;  // that peer; -1 when no peer came after this rank started
};

// Per rank: how often it arrived last, and the lags behind the second-to-last arrival.
struct StragglerCopy {
  struct Rank {
    int rank = 0;
    uint64_t last = 0;
    uint64_t lagSamples = 0;  // of `last`, those whose lag this rank could measure
    uint64_t medianLagUs = 0, p99LagUs = 0;
  };
  uint64_t collectives = 0;  // calls that counted (this rank heard from at least one peer)
  std::vector<Rank> ranks;   // ranks that were last at least once, by rank
};

class Recorder {
 public:
  // capacity 0: off (enabled() is false and nothing may be recorded); others are rounded up to
  // a power of two. detailMicros: the detail interval (0: every call in detail).
  Recorder(size_t capacity, int rank, int size, double detailMicros = 0);

  bool enabled() const { return capacity_ > 0; }
  size_t capacity() const { return capacity_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // --- writers. issue() runs under the communicator's lock; the others on the thread that
  // drives the call (one at a time). A call is named by the id issue() returned.
  // `bytes`: the call's size (send_recv: its message; else count x element size). `now`: ticks(),
  // or 0 for a call whose issue and start are stamped at its first wait (see
  // kStampAtFirstWaitBelowBytes; collectives only, then `now` of start() is 0 as well and start()
  // follows at once on the same thread). The recorder keeps a copy of what it needs of `d`.
  uint64_t issue(const OpDesc& d, uint64_t bytes, uint64_t now);
  void start(uint64_t id, AlgorithmId algo, uint64_t now);
  // Whether the call started last is followed in detail (sent, received and arrived count).
  bool detailed() const { return detail_; }
  // When the call started (ticks), once stamped; 0 before or when no longer in the ring.
  uint64_t startedTicks(uint64_t id) const;
  // `now`: ticks(), or kEndAtLastStamp for a call whose start was stamped at its first wait
  // (the clock is read only if the call made no reading of its own).
  void end(uint64_t id, bool ok, uint64_t now);
  // A call that never ran (failed while queued).
  void dropQueued(uint64_t id, uint64_t now);
  // Writes the entry of the current call if it is still to be written (kEndAtLastStamp), before
  // a dump on the driving thread.
  void settle() {
    if (deferredId_ != 0) {
      writeDeferred(ticks(), current_ == &ring_[(deferredId_ - 1) & mask_]);
    }
  }

  // --- the call in progress (started, not ended), from the transport.
  // `now`: a clock reading the waiting thread has just made (ticks()), or 0 to read it here.
  void waitingOn(int peer, uint64_t now = 0) {
    if (Entry* e = current_) {
      if (startedAt_ == 0) stamp(now != 0 ? now : ticks());  // the entry too, if still to write
      e->waitingOn.store(peer, std::memory_order_relaxed);
      e->state.store(static_cast<uint8_t>(CallState::kWaiting), std::memory_order_relaxed);
    }
  }
  void running() {
    if (Entry* e = current_) {
      e->state.store(static_cast<uint8_t>(CallState::kStarted), std::memory_order_relaxed);
      e->waitingOn.store(-1, std::memory_order_relaxed);
    }
  }
  void sent(int peer, uint64_t bytes) {
    const int i = slot(peer);
    if (i >= 0) {
      sent_[i] += bytes;
      current_->peers[i].sent.store(sent_[i], std::memory_order_relaxed);
    }
  }
  void received(int peer, uint64_t bytes) {
    const int i = slot(peer);
    if (i >= 0) {
      received_[i] += bytes;
      current_->peers[i].received.store(received_[i], std::memory_order_relaxed);
    }
  }
  // The first message of the current call from `peer` is here; early: it was waiting before
  // this rank first looked for messages in this call (it arrived before this rank started, and
  // its arrival shows as the call's start: no clock read). Later messages cost a bit test.
  // polledAt: the latest clock reading of the wait that found the message (0: none, read here).
  // The waiting thread reads the clock every few polls while it has nothing else to do, so the
  // arrival is stamped without a clock read after the message is seen (a read is 12 ns, about
  // 1.5% of an 8-byte shared-memory all-reduce), early by at most a few polls (a microsecond).
  void arrived(int peer, bool early, uint64_t polledAt = 0) {
    const int i = slot(peer);
    if (i < 0 || (arrivedMask_ & (1u << i))) return;
    arrivedMask_ |= 1u << i;
    // One clock read at most: a call first stamped here started when this message came.
    if (startedAt_ == 0) {
      stamp(polledAt != 0 ? polledAt : ticks());
    } else if (!early) {
      lastStampAt_ = std::max(startedAt_, polledAt != 0 ? polledAt : ticks());
    }
    const uint64_t at = early ? startedAt_ : lastStampAt_;
    arrivalAt_[i] = at;
    earlyMask_ |= static_cast<uint32_t>(early) << i;
    PeerSlot& s = current_->peers[i];
    s.early.store(early, std::memory_order_relaxed);
    s.firstArrivalAt.store(at, std::memory_order_relaxed);
  }

  // A wait of the current call ran past its deadline (before the transport listens a little
  // longer for the peers' accounts): the communicator dumps now, while every rank of a stalled
  // job is still alive. Set once, before the first call.
  using TimeoutHook = void (*)(void* context, const OpDesc& op, const std::string& message);
  void onTimeout(TimeoutHook hook, void* context) {
    timeoutHook_ = hook;
    timeoutContext_ = context;
  }
  void timedOut(const OpDesc& op, const std::string& message) const {
    if (timeoutHook_) timeoutHook_(timeoutContext_, op, message);
  }

  // --- readers (any thread, lock-free; they allocate). Times come out in wall-clock
  // microseconds, converted with `clock`.
  // The entries still in the ring, oldest first.
  std::vector<EntryCopy> entries(const WallClock& clock) const;
  uint64_t recorded() const { return recorded_.load(std::memory_order_acquire); }
  uint64_t issued() const { return issued_.load(std::memory_order_relaxed); }
  uint64_t completed() const { return completed_.load(std::memory_order_relaxed); }
  uint64_t lastProgressUs(const WallClock& clock) const {
    return clock.micros(lastProgressAt_.load(std::memory_order_relaxed));
  }
  // The call `id` (issue()'s), while it is still in the ring.
  bool callTicks(uint64_t id, CallTicks* out) const;
  // The oldest call not yet ended, if it is still in the ring.
  bool oldestPending(EntryCopy* out, const WallClock& clock) const;
  StragglerCopy stragglers(const WallClock& clock) const;

 private:
  Entry* entryOf(uint64_t id) {
    if (id == 0) return nullptr;
    Entry& e = ring_[(id - 1) & mask_];
    return e.version.load(std::memory_order_relaxed) == 2 * id ? &e : nullptr;
  }
  // The current call's slot for `peer`, claimed on first use; -1 when off, between calls, or
  // when the call already has kPeerSlots other peers. Found by a scan of the call's own few
  // peers (one or two compares for most calls), with no per-rank table to load. The writer keeps
  // its own copy of what it wrote (counts, sums, arrivals), so that recording only stores to the
  // ring and never waits for a ring line to be read.
  int slot(int peer) {
    if (current_ == nullptr) return -1;
    const int n = peerCount_;
    for (int i = 0; i < n; ++i) {
      if (slotRank_[i] == peer) return i;
    }
    if (n >= kPeerSlots || peer < 0 || peer >= size_) return -1;
    peerCount_ = n + 1;
    slotRank_[n] = peer;
    sent_[n] = received_[n] = 0;
    PeerSlot& s = current_->peers[n];
    constexpr auto r = std::memory_order_relaxed;
    s.rank.store(peer, r);
    s.sent.store(0, r);
    s.received.store(0, r);
    s.firstArrivalAt.store(0, r);
    s.early.store(false, r);
    current_->peerCount.store(static_cast<uint8_t>(n + 1), std::memory_order_release);
    return n;
  }
  // The current call's deferred start (and issue) stamp.
  void stamp(uint64_t now);
  // Writes the whole entry of a call whose writing was deferred (kEndAtLastStamp): issued (and,
  // if `started`, started) at `now`, 0 for a stamp to come.
  void writeDeferred(uint64_t now, bool started);
  void countStraggler();
  bool copy(const Entry& e, EntryCopy* out, const WallClock& clock) const;

  const size_t capacity_;
  const size_t mask_;         // capacity_ - 1
  const uint64_t detailGap_;  // ticks; 0: every call in detail
  const int rank_;
  const int size_;
  std::unique_ptr<Entry[]> ring_;
  std::atomic<uint64_t> recorded_{0};
  std::atomic<uint64_t> issued_{0};  // collectives issued (send_recv not counted)
  std::atomic<uint64_t> completed_{0};
  std::atomic<uint64_t> lastProgressAt_{0};  // ticks

  TimeoutHook timeoutHook_ = nullptr;
  void* timeoutContext_ = nullptr;

  // The call in progress, its peers (slot i: slotRank_[i]), and the writer's copy of what it
  // wrote there (driving thread only).
  Entry* current_ = nullptr;
  // The call whose entry is still to be written (kEndAtLastStamp): its id (0: none), algorithm
  // (once started) and description (deferredDesc_, below the hot fields).
  uint64_t deferredId_ = 0;
  AlgorithmId deferredAlgo_ = AlgorithmId::kNone;
  bool detail_ = true;         // the current call is followed in detail
  uint64_t lastEndAt_ = 0;     // the end stamp of the last call
  uint64_t nextDetailAt_ = 0;  // the last detailed call's start + the interval
  uint64_t startedAt_ = 0;
  uint64_t lastStampAt_ = 0;  // the latest clock reading of the current call
  int peerCount_ = 0;
  uint32_t arrivedMask_ = 0;  // bit i: peers[i] arrived
  uint32_t earlyMask_ = 0;    // bit i: peers[i] was there before this rank looked
  int32_t slotRank_[kPeerSlots] = {};
  uint64_t arrivalAt_[kPeerSlots] = {};
  uint64_t sent_[kPeerSlots] = {};
  uint64_t received_[kPeerSlots] = {};
  // Single writer: the statistics' counters are written with a load and a store, no
  // read-modify-write.
  template <typename T>
  static void bump(std::atomic<T>& a) {
    a.store(a.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  // Straggler statistics, per rank.
  std::atomic<uint64_t> statCalls_{0};
  std::unique_ptr<std::atomic<uint64_t>[]> lastCount_;
  std::unique_ptr<std::atomic<uint64_t>[]> lagSamples_;
  std::unique_ptr<std::atomic<uint32_t>[]> lagHist_;  // size x kLagBuckets, of ticks

  // The deferred call's description: a copy (32 bytes, stores to this rank's own lines), as the
  // caller's may be gone before the entry is written (a call that fails before its end is
  // recorded, settled at a dump). Last, so that the fields every call writes keep their lines.
  OpDesc deferredDesc_;
};

// Bucket of a lag in the histogram, and a value that represents a bucket.
int lagBucket(uint64_t lag);
uint64_t lagOfBucket(int bucket);

// The writers of every call, inline: a small call passes through them several times, and on
// the test machines a call into another object file costs about as much as the recording.

inline uint64_t Recorder::issue(const OpDesc& d, uint64_t bytes, uint64_t now) {
  const uint64_t id = recorded_.load(std::memory_order_relaxed) + 1;
  if (now == 0) {  // written at its start, or later if it is not followed in detail
    deferredId_ = id;
    deferredDesc_ = d;
    recorded_.store(id, std::memory_order_release);
    bump(issued_);
    return id;
  }
  Entry& e = ring_[(id - 1) & mask_];
  e.version.store(2 * id - 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  constexpr auto r = std::memory_order_relaxed;
  e.number.store(d.seq / 2, r);  // collective j has seq 2j + 1, the sends before it 2j
  e.kind.store(static_cast<uint8_t>(d.kind), r);
  e.algo.store(static_cast<uint8_t>(AlgorithmId::kNone), r);
  e.dtype.store(static_cast<uint8_t>(d.dtype), r);
  e.op.store(static_cast<uint8_t>(d.op), r);
  e.wire.store(static_cast<uint8_t>(d.wire), r);
  e.state.store(static_cast<uint8_t>(CallState::kQueued), r);
  e.root.store(d.root, r);
  e.waitingOn.store(-1, r);
  e.count.store(d.kind == CollectiveKind::kSendRecv ? bytes : d.count, r);
  e.issuedAt.store(now, r);
  e.startedAt.store(0, r);
  e.endedAt.store(0, r);
  e.peerCount.store(0, r);  // slots are cleared when a call claims them (Recorder::slot)
  e.detailed.store(1, r);   // until its start decides
  e.version.store(2 * id, std::memory_order_release);
  recorded_.store(id, std::memory_order_release);
  if (d.kind != CollectiveKind::kSendRecv) bump(issued_);
  return id;
}

inline void Recorder::start(uint64_t id, AlgorithmId algo, uint64_t now) {
  if (now != 0) lastProgressAt_.store(now, std::memory_order_relaxed);
  startedAt_ = now;
  lastStampAt_ = now;
  peerCount_ = 0;
  arrivedMask_ = 0;
  earlyMask_ = 0;
  // A small blocking call (now 0: its clock is read at its first wait) is detailed when the
  // previous call ended at least the interval after the last detailed call started: judged by
  // the last end stamp, so no clock is read here.
  detail_ = now != 0 || lastEndAt_ >= nextDetailAt_;
  if (id != 0 && deferredId_ == id) {
    deferredAlgo_ = algo;
    current_ = &ring_[(id - 1) & mask_];
    // Written at its first wait or its end (kEndAtLastStamp); a call followed in detail now,
    // as its peers are written from its first message on.
    if (detail_) writeDeferred(0, true);
    return;
  }
  Entry* e = entryOf(id);
  current_ = e;
  if (e == nullptr) return;
  e->detailed.store(detail_, std::memory_order_relaxed);
  e->algo.store(static_cast<uint8_t>(algo), std::memory_order_relaxed);
  e->startedAt.store(now, std::memory_order_relaxed);
  e->state.store(static_cast<uint8_t>(CallState::kStarted), std::memory_order_relaxed);
}

inline void Recorder::stamp(uint64_t now) {
  if (deferredId_ != 0) return writeDeferred(now, true);
  constexpr auto r = std::memory_order_relaxed;
  startedAt_ = now;
  lastStampAt_ = now;
  lastProgressAt_.store(now, r);
  current_->issuedAt.store(now, r);
  current_->startedAt.store(now, r);
}

// The same stores as issue()'s, with the start's fields. Kept apart from issue(): a shared
// writer for both measured 0.4-0.5 points more on the 8-byte call (three alternating sittings).
inline void Recorder::writeDeferred(uint64_t now, bool started) {
  const OpDesc& d = deferredDesc_;
  const uint64_t id = deferredId_;
  deferredId_ = 0;
  Entry& e = ring_[(id - 1) & mask_];
  e.version.store(2 * id - 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  constexpr auto r = std::memory_order_relaxed;
  e.number.store(d.seq / 2, r);
  e.kind.store(static_cast<uint8_t>(d.kind), r);
  e.algo.store(static_cast<uint8_t>(started ? deferredAlgo_ : AlgorithmId::kNone), r);
  e.dtype.store(static_cast<uint8_t>(d.dtype), r);
  e.op.store(static_cast<uint8_t>(d.op), r);
  e.wire.store(static_cast<uint8_t>(d.wire), r);
  e.state.store(static_cast<uint8_t>(started ? CallState::kStarted : CallState::kQueued), r);
  e.root.store(d.root, r);
  e.waitingOn.store(-1, r);
  e.count.store(d.count, r);
  e.issuedAt.store(now, r);
  e.startedAt.store(started ? now : 0, r);
  e.endedAt.store(0, r);
  e.peerCount.store(0, r);
  e.detailed.store(started ? detail_ : 1, r);
  e.version.store(2 * id, std::memory_order_release);
  if (now == 0 || !started) return;
  startedAt_ = now;
  lastStampAt_ = now;
  lastProgressAt_.store(now, r);
}

inline void Recorder::end(uint64_t id, bool ok, uint64_t now) {
  // Sends and receives run several calls at once: the traffic goes to the one started last,
  // until it ends.
  const bool wasCurrent = id != 0 && current_ == &ring_[(id - 1) & mask_];
  if (now == kEndAtLastStamp) now = wasCurrent && lastStampAt_ != 0 ? lastStampAt_ : ticks();
  // Its entry, if still to be written: a call that never waited, or never started.
  if (id != 0 && deferredId_ == id) writeDeferred(now, wasCurrent);
  if (wasCurrent) {
    if (startedAt_ == 0) stamp(now);  // never waited
    if (detail_) nextDetailAt_ = startedAt_ + detailGap_;
    current_ = nullptr;
  }
  lastEndAt_ = now;
  Entry* e = entryOf(id);
  if (e == nullptr) return;
  constexpr auto r = std::memory_order_relaxed;
  e->endedAt.store(now, r);
  e->waitingOn.store(-1, r);
  e->state.store(static_cast<uint8_t>(ok ? CallState::kDone : CallState::kFailed), r);
  const bool collective = e->kind.load(r) != static_cast<uint8_t>(CollectiveKind::kSendRecv);
  if (ok) {
    lastProgressAt_.store(now, r);
    if (collective) {
      bump(completed_);
      if (wasCurrent) countStraggler();
    }
  }
  // The next call's lines of the ring, fetched for writing while the application runs: the ring
  // is larger than the caches, and each call writes an entry that was last written 'capacity'
  // calls ago.
  const char* next = reinterpret_cast<const char*>(&ring_[id & mask_]);
  __builtin_prefetch(next, 1);
  __builtin_prefetch(next + 64, 1);
}

inline void Recorder::countStraggler() {
  // Arrivals as this rank saw them: its own start, and the first message of each peer it heard
  // from. A peer whose message was already waiting arrived before this rank (by an unknown time).
  // Order: (time, 0) for a peer already there, (start, 1) for this rank, (time, 2) for the rest.
  // Read from the writer's own copies of the call that just ended (Recorder::end), not the ring.
  struct Arrival {
    int rank;
    uint64_t t;
    int order;
  };
  auto later = [](const Arrival& a, const Arrival& b) {
    return a.t != b.t ? a.t > b.t : a.order > b.order;
  };
  if (arrivedMask_ == 0) return;
  const uint64_t start = startedAt_;
  Arrival last{rank_, start, 1};
  Arrival second{-1, 0, -1};
  for (uint32_t m = arrivedMask_; m != 0; m &= m - 1) {
    const int i = std::countr_zero(m);
    const Arrival a = (earlyMask_ >> i) & 1u ? Arrival{slotRank_[i], start, 0}
                                             : Arrival{slotRank_[i], arrivalAt_[i], 2};
    if (later(a, last)) {
      second = last;
      last = a;
    } else if (second.order < 0 || later(a, second)) {
      second = a;
    }
  }
  if (last.rank < 0 || last.rank >= size_) return;
  bump(statCalls_);
  const auto who = static_cast<size_t>(last.rank);
  bump(lastCount_[who]);
  if (last.order == 1) return;  // this rank came last: by how much, only the others can tell
  bump(lagHist_[who * kLagBuckets + static_cast<size_t>(lagBucket(last.t - second.t))]);
  bump(lagSamples_[who]);
}

}  // namespace chorus::trace
