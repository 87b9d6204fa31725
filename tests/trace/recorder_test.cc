// The ring on its own: which calls it keeps, in which order, with which fields.
#include "trace/recorder.h"

#include "trace/clock.h"

#include <gtest/gtest.h>

#include <memory>

namespace chorus::trace {
namespace {

OpDesc call(uint64_t j, uint64_t count) {
  OpDesc d = OpDesc::of(CollectiveKind::kAllReduce, count, DataType::kF32, ReduceOp::kMax);
  d.seq = OpDesc::collectiveSeq(j);
  return d;
}

TEST(Recorder, CapacityIsRoundedUpToAPowerOfTwo) {
  EXPECT_EQ(Recorder(2000, 0, 2).capacity(), 2048u);
  EXPECT_EQ(Recorder(8, 0, 2).capacity(), 8u);
  EXPECT_EQ(Recorder(5, 0, 2).capacity(), 8u);
  EXPECT_FALSE(Recorder(0, 0, 2).enabled());
  // 5 asked, 8 kept: the ring holds the last 8 calls.
  Recorder rec(5, 0, 2);
  for (uint64_t j = 0; j < 20; ++j) {
    const uint64_t id = rec.issue(call(j, 1), 4, ticks());
    rec.start(id, AlgorithmId::kRing, ticks());
    rec.end(id, true, ticks());
  }
  const auto entries = rec.entries(WallClock::now());
  ASSERT_EQ(entries.size(), 8u);
  EXPECT_EQ(entries.front().number, 12u);
  EXPECT_EQ(entries.back().number, 19u);
}

// A small call stamped at its first wait ends at its last clock reading: the first message of
// its last peer, or its own start when every message was already there.
TEST(Recorder, SmallCallEndsAtItsLastClockReading) {
  Recorder rec(8, 0, 3);
  uint64_t id = rec.issue(call(0, 2), 8, 0);
  rec.start(id, AlgorithmId::kRing, 0);
  rec.waitingOn(1);
  rec.arrived(1, false);
  rec.arrived(2, false);
  rec.received(2, 8);
  rec.end(id, true, kEndAtLastStamp);
  CallTicks t;
  ASSERT_TRUE(rec.callTicks(id, &t));
  EXPECT_NE(t.startedAt, 0u);
  EXPECT_GE(t.endedAt, t.startedAt);
  EXPECT_EQ(t.endedAt, t.lastArrivalAt);
  EXPECT_EQ(t.lastPeer, 2);

  id = rec.issue(call(1, 2), 8, 0);
  rec.start(id, AlgorithmId::kRing, 0);
  rec.arrived(1, true);  // already there: the call is stamped now, once
  rec.end(id, true, kEndAtLastStamp);
  ASSERT_TRUE(rec.callTicks(id, &t));
  EXPECT_NE(t.startedAt, 0u);
  EXPECT_EQ(t.endedAt, t.startedAt);
  EXPECT_EQ(t.issuedAt, t.startedAt);

  // No reading at all (no peer): the clock is read at the end.
  id = rec.issue(call(2, 2), 8, 0);
  rec.start(id, AlgorithmId::kRing, 0);
  rec.end(id, true, kEndAtLastStamp);
  ASSERT_TRUE(rec.callTicks(id, &t));
  EXPECT_NE(t.endedAt, 0u);
  EXPECT_EQ(t.startedAt, t.endedAt);
}

TEST(Recorder, KeepsTheLastCallsInOrder) {
  Recorder rec(4, 0, 3);
  for (uint64_t j = 0; j < 10; ++j) {
    uint64_t id = rec.issue(call(j, 100 + j), 4 * (100 + j), ticks());
    rec.start(id, AlgorithmId::kRing, ticks());
    rec.sent(1, 8);
    rec.sent(1, 8);
    rec.received(2, 16);
    rec.arrived(2, false);
    rec.end(id, true, ticks());
  }
  EXPECT_EQ(rec.recorded(), 10u);
  EXPECT_EQ(rec.issued(), 10u);
  EXPECT_EQ(rec.completed(), 10u);
  const uint64_t before = wallMicros();
  auto entries = rec.entries(WallClock::now());
  ASSERT_EQ(entries.size(), 4u);
  for (size_t i = 0; i < entries.size(); ++i) {
    const EntryCopy& e = entries[i];
    const uint64_t j = 6 + i;
    EXPECT_EQ(e.number, j);
    EXPECT_EQ(e.kind, CollectiveKind::kAllReduce);
    EXPECT_EQ(e.algo, AlgorithmId::kRing);
    EXPECT_EQ(e.op, ReduceOp::kMax);
    EXPECT_EQ(e.count, 100 + j);
    EXPECT_EQ(e.bytes, 4 * (100 + j));
    EXPECT_EQ(e.state, CallState::kDone);
    // Wall-clock times of this very test: within the last minute, in order.
    EXPECT_GT(e.issuedUs + 60'000'000, before);
    EXPECT_LE(e.issuedUs, e.startedUs);
    EXPECT_LE(e.startedUs, e.endedUs);
    EXPECT_LE(e.endedUs, before + 1000);
    if (i > 0) {
      EXPECT_LE(entries[i - 1].endedUs, e.issuedUs);
    }
    ASSERT_EQ(e.peerCount, 2);
    EXPECT_EQ(e.peers[0].rank, 1);
    EXPECT_EQ(e.peers[0].sent, 16u);
    EXPECT_EQ(e.peers[0].received, 0u);
    EXPECT_EQ(e.peers[1].rank, 2);
    EXPECT_EQ(e.peers[1].received, 16u);
    EXPECT_NE(e.peers[1].firstArrivalUs, 0u);
  }
}

TEST(Recorder, ShowsTheWaitAndTheQueue) {
  Recorder rec(8, 1, 4);
  uint64_t a = rec.issue(call(0, 1), 4, ticks());
  uint64_t b = rec.issue(call(1, 1), 4, ticks());
  OpDesc p2p = OpDesc::of(CollectiveKind::kSendRecv, 0, DataType::kU8, ReduceOp::kSum);
  p2p.seq = OpDesc::pointToPointSeq(2);
  rec.issue(p2p, 64, ticks());
  rec.start(a, AlgorithmId::kRecursiveDoubling, ticks());
  rec.waitingOn(3);
  EntryCopy cur;
  const WallClock clock = WallClock::now();
  ASSERT_TRUE(rec.oldestPending(&cur, clock));
  EXPECT_EQ(cur.number, 0u);
  EXPECT_EQ(cur.state, CallState::kWaiting);
  EXPECT_EQ(cur.waitingOn, 3);
  auto entries = rec.entries(clock);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[1].state, CallState::kQueued);
  EXPECT_FALSE(entries[1].started);
  EXPECT_EQ(entries[2].kind, CollectiveKind::kSendRecv);
  EXPECT_EQ(entries[2].number, 2u);  // the sends before collective #2
  EXPECT_EQ(entries[2].count, 64u);
  rec.end(a, false, ticks());
  rec.dropQueued(b, ticks());
  EXPECT_EQ(rec.completed(), 0u);
  entries = rec.entries(clock);
  EXPECT_EQ(entries[0].state, CallState::kFailed);
  EXPECT_EQ(entries[1].state, CallState::kFailed);
}

// A deferred entry is written from the recorder's own copy of the call's description: the
// caller's may be changed or gone by the first wait (a temporary, a call's frame that unwound).
// Without the copy the first call's entry shows the changed description in any build, and
// AddressSanitizer reports the second call's read after scope.
TEST(Recorder, DeferredEntryKeepsItsOwnCopyOfTheCall) {
  Recorder rec(8, 0, 2, /*detailMicros=*/1e9);
  const WallClock clock = WallClock::now();
  uint64_t id = rec.issue(call(0, 2), 8, 0);  // the first call, followed in detail
  rec.start(id, AlgorithmId::kRing, 0);
  rec.end(id, true, kEndAtLastStamp);

  // Changed after its issue.
  auto changed = std::make_unique<OpDesc>(call(1, 5));
  id = rec.issue(*changed, 20, 0);
  rec.start(id, AlgorithmId::kRing, 0);
  ASSERT_FALSE(rec.detailed());
  *changed = OpDesc::of(CollectiveKind::kBroadcast, 99, DataType::kU8, ReduceOp::kSum, 3);
  rec.waitingOn(1);
  auto entries = rec.entries(clock);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].number, 1u);
  EXPECT_EQ(entries[1].kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(entries[1].dtype, DataType::kF32);
  EXPECT_EQ(entries[1].op, ReduceOp::kMax);
  EXPECT_EQ(entries[1].count, 5u);
  EXPECT_EQ(entries[1].root, 0);
  rec.running();
  rec.end(id, true, kEndAtLastStamp);

  // Gone before its first wait.
  {
    const OpDesc gone = call(2, 7);
    id = rec.issue(gone, 28, 0);
    rec.start(id, AlgorithmId::kRing, 0);
    ASSERT_FALSE(rec.detailed());
  }
  rec.waitingOn(1);
  entries = rec.entries(clock);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[2].number, 2u);
  EXPECT_EQ(entries[2].kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(entries[2].count, 7u);
}

// A small blocking call that is not followed in detail writes its entry at its first wait (or
// at its end, or before a dump), not at its issue: it is counted at once, and its entry is whole.
TEST(Recorder, UndetailedSmallCallWritesItsEntryWhenItWaits) {
  Recorder rec(8, 0, 2, /*detailMicros=*/1e9);
  const WallClock clock = WallClock::now();
  // The first call is followed in detail; the next ones, within the interval, are not.
  const OpDesc d0 = call(0, 2);
  uint64_t id = rec.issue(d0, 8, 0);
  rec.start(id, AlgorithmId::kRing, 0);
  EXPECT_TRUE(rec.detailed());
  rec.waitingOn(1);
  rec.running();
  rec.end(id, true, kEndAtLastStamp);

  const OpDesc d1 = call(1, 3);
  id = rec.issue(d1, 12, 0);
  EXPECT_EQ(rec.recorded(), 2u);
  EXPECT_EQ(rec.issued(), 2u);
  rec.start(id, AlgorithmId::kRecursiveDoubling, 0);
  EXPECT_FALSE(rec.detailed());
  EXPECT_EQ(rec.entries(clock).size(), 1u);  // not written yet
  rec.waitingOn(1);
  auto entries = rec.entries(clock);
  ASSERT_EQ(entries.size(), 2u);
  EntryCopy e = entries.back();
  EXPECT_EQ(e.number, 1u);
  EXPECT_EQ(e.kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(e.algo, AlgorithmId::kRecursiveDoubling);
  EXPECT_EQ(e.dtype, DataType::kF32);
  EXPECT_EQ(e.op, ReduceOp::kMax);
  EXPECT_EQ(e.count, 3u);
  EXPECT_EQ(e.state, CallState::kWaiting);
  EXPECT_EQ(e.waitingOn, 1);
  EXPECT_FALSE(e.detailed);
  EXPECT_TRUE(e.started);
  EXPECT_EQ(e.issuedUs, e.startedUs);
  rec.running();
  rec.end(id, true, kEndAtLastStamp);
  e = rec.entries(clock).back();
  EXPECT_EQ(e.state, CallState::kDone);
  EXPECT_GE(e.endedUs, e.startedUs);
  EXPECT_EQ(rec.completed(), 2u);

  // One that never waits is written at its end.
  const OpDesc d2 = call(2, 1);
  id = rec.issue(d2, 4, 0);
  rec.start(id, AlgorithmId::kRing, 0);
  rec.end(id, true, kEndAtLastStamp);
  e = rec.entries(clock).back();
  EXPECT_EQ(e.number, 2u);
  EXPECT_EQ(e.state, CallState::kDone);
  EXPECT_TRUE(e.started);
  EXPECT_EQ(e.endedUs, e.startedUs);

  // One that fails before it starts, as failed and never started.
  const OpDesc d3 = call(3, 1);
  id = rec.issue(d3, 4, 0);
  rec.dropQueued(id, ticks());
  e = rec.entries(clock).back();
  EXPECT_EQ(e.number, 3u);
  EXPECT_EQ(e.state, CallState::kFailed);
  EXPECT_FALSE(e.started);

  // A dump before its first wait (settle) shows it started.
  const OpDesc d4 = call(4, 1);
  id = rec.issue(d4, 4, 0);
  rec.start(id, AlgorithmId::kRing, 0);
  rec.settle();
  e = rec.entries(clock).back();
  EXPECT_EQ(e.number, 4u);
  EXPECT_EQ(e.state, CallState::kStarted);
  EXPECT_TRUE(e.started);
  rec.end(id, false, kEndAtLastStamp);
  e = rec.entries(clock).back();
  EXPECT_EQ(e.number, 4u);
  EXPECT_EQ(e.state, CallState::kFailed);
  EXPECT_EQ(rec.entries(clock).size(), 5u);
}

TEST(Recorder, OffRecordsNothing) {
  Recorder rec(0, 0, 2);
  EXPECT_FALSE(rec.enabled());
  EXPECT_TRUE(rec.entries(WallClock::now()).empty());
  EXPECT_EQ(rec.stragglers(WallClock::now()).collectives, 0u);
}

TEST(Recorder, LagBucketsKeepTheirValues) {
  for (uint64_t v : {1ull, 7ull, 100ull, 12000ull, 30000ull, 5000000ull}) {
    const double back = static_cast<double>(lagOfBucket(lagBucket(v)));
    EXPECT_NEAR(back, static_cast<double>(v), 0.13 * static_cast<double>(v) + 1) << v;
  }
  EXPECT_EQ(lagBucket(0), 0);
}

}  // namespace
}  // namespace chorus::trace
