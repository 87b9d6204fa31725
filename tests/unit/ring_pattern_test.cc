// Pure rank arithmetic of the ring and recursive doubling.
#include "algo/ring_pattern.h"
#include "algo/collectives.h"
#include "algo/topology.h"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <set>

namespace chorus::algo {
namespace {

TEST(RingPattern, BalancedBlocksCoverEveryElementOnce) {
  for (size_t total : {0ul, 1ul, 7ul, 8ul, 9ul, 1000003ul}) {
    for (int n : {1, 2, 3, 5, 8}) {
      size_t next = 0;
      for (int i = 0; i < n; ++i) {
        Block b = balancedBlock(total, n, i);
        EXPECT_EQ(b.offset, next);
        EXPECT_LE(b.count, balancedBlock(total, n, 0).count);  // block 0 is the largest
        next += b.count;
      }
      EXPECT_EQ(next, total);
    }
  }
}

// Simulates which block each rank holds fully reduced after the reduce-scatter steps, and checks
// that every rank receives every other block exactly once in the all-gather.
TEST(RingPattern, ReduceScatterEndsWithOwnBlockAndGatherCompletes) {
  for (int n : {2, 3, 4, 5, 8}) {
    // contributions[r][b]: set of ranks whose data block b on rank r includes.
    std::vector<std::vector<std::set<int>>> have(n, std::vector<std::set<int>>(n));
    for (int r = 0; r < n; ++r) {
      for (int b = 0; b < n; ++b) have[r][b] = {r};
    }
    for (int t = 0; t < n - 1; ++t) {
      auto before = have;
      for (int r = 0; r < n; ++r) {
        int next = (r + 1) % n;
        int sent = ringRsSendBlock(r, n, t);
        EXPECT_EQ(ringRsRecvBlock(next, n, t), sent) << "n=" << n << " t=" << t;
        for (int q : before[r][sent]) have[next][sent].insert(q);
      }
    }
    for (int r = 0; r < n; ++r) EXPECT_EQ(have[r][r].size(), static_cast<size_t>(n)) << r;
    for (int r = 0; r < n; ++r) {
      std::set<int> got{r};
      for (int t = 0; t < n - 1; ++t) {
        int prev = (r + n - 1) % n;
        EXPECT_EQ(ringAgRecvBlock(r, n, t), ringAgSendBlock(prev, n, t));
        got.insert(ringAgRecvBlock(r, n, t));
        if (t > 0) {
          EXPECT_EQ(ringAgSendBlock(r, n, t), ringAgRecvBlock(r, n, t - 1));
        }
      }
      EXPECT_EQ(got.size(), static_cast<size_t>(n));
    }
  }
}

TEST(RingPattern, RecursiveDoublingLayout) {
  for (int n = 1; n <= 17; ++n) {
    RdLayout l = rdLayout(n);
    EXPECT_EQ(l.p2 + l.extra, n);
    EXPECT_LE(l.p2, n);
    EXPECT_GT(l.p2 * 2, n);
    std::set<int> cores;
    for (int r = 0; r < n; ++r) {
      int c = rdCoreRank(r, l);
      if (c < 0) {
        EXPECT_LT(r, 2 * l.extra);
        EXPECT_EQ(r % 2, 0);
        continue;
      }
      EXPECT_EQ(rdRealRank(c, l), r);
      cores.insert(c);
    }
    EXPECT_EQ(cores.size(), static_cast<size_t>(l.p2));
  }
}

TEST(Topology, HostsNumberedByLowestRankAndLocalRanksInOrder) {
  Topology t = topologyOf({"b", "a", "b", "a"});
  ASSERT_EQ(t.hostCount(), 2);
  EXPECT_EQ(t.hosts[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(t.hosts[1], (std::vector<int>{1, 3}));
  EXPECT_EQ(t.hostOf, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(t.localRank, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_TRUE(t.even);
  EXPECT_TRUE(t.layered());

  Topology u = topologyOf({"x", "x", "y", "y", "y"});
  EXPECT_FALSE(u.even);
  EXPECT_EQ(u.maxLocal(), 3);
  EXPECT_TRUE(u.layered());
  EXPECT_FALSE(topologyOf({"x", "x", "x"}).layered());  // one host
  EXPECT_FALSE(topologyOf({"x", "y", "z"}).layered());  // one rank per host
  EXPECT_FALSE(topologyOf({}).layered());
}

}  // namespace
}  // namespace chorus::algo
