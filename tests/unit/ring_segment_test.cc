// The ring's segment (algo/group.h): the set segment everywhere but over TCP, where a block is
// cut into about four, between the set segment and Options::tcpSegmentBytes.
#include "algo/group.h"

#include <gtest/gtest.h>

namespace chorus::algo {
namespace {

TEST(RingSegment, SharedMemoryKeepsTheSetSegment) {
  Group g;
  g.segmentBytes = 512 << 10;
  EXPECT_EQ(g.ringSegmentBytes(64 << 20), 512u << 10);
  EXPECT_EQ(g.ringSegmentBytes(1), 512u << 10);
}

TEST(RingSegment, OverTcpAQuarterOfTheBlockWithinTheBounds) {
  Group g;
  g.segmentBytes = 512 << 10;
  g.tcpSegmentBytes = 2 << 20;
  EXPECT_EQ(g.ringSegmentBytes(1 << 20), 512u << 10);  // small blocks: the set segment
  EXPECT_EQ(g.ringSegmentBytes(3 << 20), 768u << 10);  // a quarter
  EXPECT_EQ(g.ringSegmentBytes(8 << 20), 2u << 20);
  EXPECT_EQ(g.ringSegmentBytes(32 << 20), 2u << 20);  // at most tcpSegmentBytes
  // A set segment at or above the TCP one wins: the application's choice, as before.
  g.segmentBytes = 4 << 20;
  EXPECT_EQ(g.ringSegmentBytes(64 << 20), 4u << 20);
  g.segmentBytes = 512 << 10;
  g.tcpSegmentBytes = 0;  // CHORUS_TCP_SEGMENT_BYTES=0
  EXPECT_EQ(g.ringSegmentBytes(64 << 20), 512u << 10);
}

}  // namespace
}  // namespace chorus::algo
