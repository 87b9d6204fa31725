// What the layers above the communicator read from the recorder: a call stamped at its first
// wait, the split of a call at the last peer's arrival, and the span ring.
#include "trace/clock.h"
#include "trace/recorder.h"
#include "trace/span_log.h"

#include <gtest/gtest.h>

#include <thread>

namespace chorus::trace {
namespace {

OpDesc call(uint64_t j) {
  OpDesc d = OpDesc::of(CollectiveKind::kAllReduce, 2, DataType::kF32, ReduceOp::kSum);
  d.seq = OpDesc::collectiveSeq(j);
  return d;
}

void pause() { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }

TEST(CallTicks, ASmallBlockingCallIsStampedAtItsFirstWait) {
  Recorder rec(4, 0, 2);
  const uint64_t before = ticks();
  const uint64_t id = rec.issue(call(0), 8, 0);
  rec.start(id, AlgorithmId::kRecursiveDoubling, 0);
  CallTicks c;
  ASSERT_TRUE(rec.callTicks(id, &c));
  EXPECT_EQ(c.startedAt, 0u);  // not stamped yet
  pause();
  const uint64_t beforeWait = ticks();
  rec.sent(1, 8);
  rec.waitingOn(1);
  EXPECT_GE(rec.startedTicks(id), beforeWait);
  const EntryCopy e = rec.entries(WallClock::now()).at(0);
  EXPECT_EQ(e.issuedUs, e.startedUs);
  EXPECT_NE(e.startedUs, 0u);
  rec.received(1, 8);
  rec.running();
  rec.end(id, true, ticks());
  ASSERT_TRUE(rec.callTicks(id, &c));
  EXPECT_GE(c.startedAt, before);
  EXPECT_GE(c.endedAt, c.startedAt);

  // A call that never waits takes its end as its start.
  const uint64_t id2 = rec.issue(call(1), 8, 0);
  rec.start(id2, AlgorithmId::kRecursiveDoubling, 0);
  const uint64_t end = ticks();
  rec.end(id2, true, end);
  ASSERT_TRUE(rec.callTicks(id2, &c));
  EXPECT_EQ(c.startedAt, end);
  EXPECT_EQ(c.endedAt, end);
}

TEST(CallTicks, SplitAtTheFirstArrivalOfTheLastPeer) {
  Recorder rec(4, 0, 3);
  const uint64_t id = rec.issue(call(0), 8, ticks());
  const uint64_t start = ticks();
  rec.start(id, AlgorithmId::kRing, start);
  rec.arrived(1, /*early=*/true);  // there before this rank started
  pause();
  rec.arrived(2, false);
  rec.arrived(2, false);  // later messages of the same peer change nothing
  pause();
  rec.end(id, true, ticks());
  CallTicks c;
  ASSERT_TRUE(rec.callTicks(id, &c));
  EXPECT_EQ(c.state, CallState::kDone);
  EXPECT_EQ(c.kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(c.lastPeer, 2);
  EXPECT_GT(c.lastArrivalAt, c.startedAt);
  EXPECT_GT(c.endedAt, c.lastArrivalAt);
  const WallClock clock = WallClock::now();
  EXPECT_GE(clock.microsOf(static_cast<double>(c.lastArrivalAt - c.startedAt)), 1500.0);

  // Every peer early: no wait, no last peer.
  const uint64_t id2 = rec.issue(call(1), 8, ticks());
  rec.start(id2, AlgorithmId::kRing, ticks());
  rec.arrived(1, true);
  rec.end(id2, true, ticks());
  ASSERT_TRUE(rec.callTicks(id2, &c));
  EXPECT_EQ(c.lastPeer, -1);
  EXPECT_EQ(c.lastArrivalAt, c.startedAt);

  // Overwritten in the ring: gone.
  for (uint64_t j = 2; j < 8; ++j) rec.issue(call(j), 8, ticks());
  EXPECT_FALSE(rec.callTicks(id, &c));
}

TEST(CallTicks, ArrivalTakesTheWaitsOwnClockReading) {
  Recorder rec(4, 0, 3);
  const uint64_t id = rec.issue(call(0), 8, 0);
  rec.start(id, AlgorithmId::kRing, 0);
  const uint64_t waitedAt = ticks();
  rec.waitingOn(2, waitedAt);  // the wait's first reading stamps the start
  EXPECT_EQ(rec.startedTicks(id), waitedAt);
  rec.arrived(1, /*early=*/true, waitedAt + 5);  // already there: no time of its own
  rec.arrived(2, /*early=*/false, waitedAt + 700);
  rec.end(id, true, kEndAtLastStamp);
  CallTicks c;
  ASSERT_TRUE(rec.callTicks(id, &c));
  EXPECT_EQ(c.startedAt, waitedAt);
  EXPECT_EQ(c.lastPeer, 2);
  EXPECT_EQ(c.lastArrivalAt, waitedAt + 700);  // the reading, not a later one
  EXPECT_EQ(c.endedAt, waitedAt + 700);        // a small call ends at its last reading
  const StragglerCopy s = rec.stragglers(WallClock::now());
  EXPECT_EQ(s.collectives, 1u);
  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_EQ(s.ranks[0].rank, 2);
  EXPECT_EQ(s.ranks[0].lagSamples, 1u);  // behind rank 0's start (rank 1 was there before it)

  // A reading older than the call's start (taken before it was stamped) counts as the start.
  const uint64_t id2 = rec.issue(call(1), 8, ticks());
  const uint64_t start = ticks();
  rec.start(id2, AlgorithmId::kRing, start);
  rec.arrived(1, /*early=*/false, start - 100);
  rec.end(id2, true, ticks());
  ASSERT_TRUE(rec.callTicks(id2, &c));
  EXPECT_EQ(c.lastArrivalAt, start);
}

TEST(SpanLog, KeepsTheLastSpansInOrder) {
  SpanLog log(3);
  EXPECT_TRUE(log.spans().empty());
  for (int i = 0; i < 5; ++i) {
    SpanRecord s;
    s.kind = i % 2 ? SpanKind::kBucket : SpanKind::kCompute;
    s.step = 10 + i;
    s.index = i % 2 ? i : -1;
    s.call = i % 2 ? 100 + i : -1;
    s.bytes = 4096;
    s.startAt = 1000 + static_cast<uint64_t>(i);
    s.endAt = 2000 + static_cast<uint64_t>(i);
    s.waitTicks = 7;
    s.transferTicks = 9;
    s.lastPeer = i % 2 ? 3 : -1;
    log.add(s);
  }
  const auto spans = log.spans();
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].step, 12);
  EXPECT_EQ(spans[0].kind, SpanKind::kCompute);
  EXPECT_EQ(spans[0].index, -1);
  EXPECT_EQ(spans[0].lastPeer, -1);
  EXPECT_EQ(spans[1].step, 13);
  EXPECT_EQ(spans[1].kind, SpanKind::kBucket);
  EXPECT_EQ(spans[1].index, 3);
  EXPECT_EQ(spans[1].call, 103);
  EXPECT_EQ(spans[1].lastPeer, 3);
  EXPECT_EQ(spans[1].endAt, 2003u);
  EXPECT_EQ(spans[1].waitTicks, 7u);
  EXPECT_EQ(spans[2].step, 14);
  EXPECT_EQ(log.added(), 5u);
  SpanLog off(0);
  off.add(SpanRecord{});
  EXPECT_TRUE(off.spans().empty());
}

// A small blocking call (no clock read at its start) is followed in detail when the previous
// call ended at least the interval after the last detailed one started; calls stamped at their
// start always are.
TEST(CallDetail, SmallCallsInATightLoopOncePerInterval) {
  Recorder rec(64, 0, 2, /*detailMicros=*/5000);
  auto smallCall = [&](uint64_t j) {
    const uint64_t id = rec.issue(call(j), 8, 0);
    rec.start(id, AlgorithmId::kRecursiveDoubling, 0);
    const bool detailed = rec.detailed();
    rec.waitingOn(1);
    rec.running();
    rec.end(id, true, kEndAtLastStamp);
    return detailed;
  };
  EXPECT_TRUE(smallCall(0));  // the first one
  int detailed = 0;
  for (uint64_t j = 1; j <= 20; ++j) detailed += smallCall(j);
  EXPECT_EQ(detailed, 0);  // 20 calls back to back: well within 5 ms of the first
  // A call stamped at its start (large, queued or non-blocking) is always detailed.
  const uint64_t id = rec.issue(call(21), 1 << 20, ticks());
  rec.start(id, AlgorithmId::kRing, ticks());
  EXPECT_TRUE(rec.detailed());
  rec.end(id, true, ticks());
  // The next small call follows the large one too closely; the one after a pause does not.
  std::this_thread::sleep_for(std::chrono::milliseconds(12));
  EXPECT_FALSE(smallCall(22));
  EXPECT_TRUE(smallCall(23));
  // A call that lasted the interval (it waited for a peer) makes the next one detailed.
  const uint64_t id2 = rec.issue(call(24), 8, 0);
  rec.start(id2, AlgorithmId::kRecursiveDoubling, 0);
  rec.waitingOn(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(12));
  rec.arrived(1, false);
  rec.end(id2, true, kEndAtLastStamp);
  EXPECT_TRUE(smallCall(25));
  // Interval 0: every call.
  Recorder every(64, 0, 2, 0);
  for (uint64_t j = 0; j < 5; ++j) {
    const uint64_t i = every.issue(call(j), 8, 0);
    every.start(i, AlgorithmId::kRecursiveDoubling, 0);
    EXPECT_TRUE(every.detailed());
    every.end(i, true, kEndAtLastStamp);
  }
}

}  // namespace
}  // namespace chorus::trace
