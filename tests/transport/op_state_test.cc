// The recent-call lookup behind mismatch messages: a late frame is described against the call
// this rank made under the same sequence number, and never against a slot nobody wrote.
#include "transport/op_state.h"

#include <gtest/gtest.h>

#include <string>

namespace chorus::transport {
namespace {

OpDesc call(uint64_t seq, CollectiveKind kind, uint64_t count) {
  OpDesc d = OpDesc::of(kind, count, DataType::kF32, ReduceOp::kSum);
  d.seq = seq;
  return d;
}

// What the lookup found, as text ("nothing" when null) so a wrong answer shows in the failure.
std::string found(const OpState& s, uint64_t seq) {
  const OpDesc* d = s.recent(seq);
  return d == nullptr ? "nothing" : d->name() + " " + d->describe();
}
std::string shown(const OpDesc& d) { return d.name() + " " + d.describe(); }

TEST(OpStateHistory, EmptySlotsMatchNoSequenceNumber) {
  OpState s;
  // Sequence number 0 (sends before the first collective) is what an empty OpDesc holds.
  EXPECT_EQ(found(s, 0), "nothing");
  EXPECT_EQ(found(s, 16), "nothing");
  EXPECT_EQ(found(s, 3), "nothing");
  s.remember(call(3, CollectiveKind::kBroadcast, 7));
  EXPECT_EQ(found(s, 0), "nothing");  // still never written
  EXPECT_EQ(found(s, 19), "nothing");
}

TEST(OpStateHistory, FindsTheCallOfThatSequenceNumberOnly) {
  OpState s;
  const OpDesc p2p = call(0, CollectiveKind::kSendRecv, 0);
  const OpDesc first = call(1, CollectiveKind::kAllReduce, 13);
  s.remember(p2p);
  s.remember(first);
  EXPECT_EQ(found(s, 0), shown(p2p));
  EXPECT_EQ(found(s, 1), shown(first));
  // Sixteen calls later the slot holds a newer call: the old number is no longer known.
  const OpDesc later = call(17, CollectiveKind::kAllGather, 5);
  s.remember(later);
  EXPECT_EQ(found(s, 1), "nothing");
  EXPECT_EQ(found(s, 17), shown(later));
  EXPECT_EQ(found(s, 33), "nothing");
  EXPECT_EQ(found(s, 0), shown(p2p));
}

}  // namespace
}  // namespace chorus::transport
