// Pure rank and block arithmetic of the binomial and scatter + all-gather broadcasts and of the
// recursive halving reduce-scatter / doubling all-gather (algo/binomial_pattern.h).
#include "algo/binomial_pattern.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace chorus::algo {
namespace {

int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// Children of rel in send order (largest subtree first).
std::vector<int> childrenOf(int rel, int n) {
  std::vector<int> c;
  for (int m = binomialMask(rel, n) / 2; m >= 1; m /= 2) {
    if (rel + m < n) c.push_back(rel + m);
  }
  return c;
}

TEST(BinomialPattern, RootRelativeRanksAreABijection) {
  for (int n : {1, 2, 3, 5, 8, 13}) {
    for (int root = 0; root < n; ++root) {
      std::set<int> seen;
      for (int r = 0; r < n; ++r) {
        const int rel = rootRelative(r, root, n);
        EXPECT_EQ(fromRootRelative(rel, root, n), r);
        seen.insert(rel);
      }
      EXPECT_EQ(seen.size(), static_cast<size_t>(n));
      EXPECT_EQ(rootRelative(root, root, n), 0);
    }
  }
}

// Every relative rank but 0 has one parent that lists it as a child, subtrees are the ranges
// [rel, end) and tile into their children's, and depth and rounds stay within ceil(log2 n).
TEST(BinomialPattern, TreeIsConsistentAndShallow) {
  for (int n = 1; n <= 70; ++n) {
    std::vector<int> parentSeen(static_cast<size_t>(n), -2);
    int maxRound = -1;
    for (int rel = 0; rel < n; ++rel) {
      const int end = binomialSubtreeEnd(rel, n);
      EXPECT_GT(end, rel);
      EXPECT_LE(end, n);
      // The subtree is rel followed by its children's subtrees, in order.
      int next = rel + 1;
      std::vector<int> kids = childrenOf(rel, n);
      for (auto it = kids.rbegin(); it != kids.rend(); ++it) {
        EXPECT_EQ(*it, next) << "n=" << n << " rel=" << rel;
        next = binomialSubtreeEnd(*it, n);
        parentSeen[static_cast<size_t>(*it)] = rel;
      }
      EXPECT_EQ(next, end) << "n=" << n << " rel=" << rel;
      EXPECT_LE(binomialDepth(rel), ceilLog2(n));
      maxRound = std::max(maxRound, binomialRound(rel, n));
    }
    EXPECT_EQ(binomialParent(0), -1);
    EXPECT_EQ(binomialSubtreeEnd(0, n), n);
    for (int rel = 1; rel < n; ++rel) {
      EXPECT_EQ(parentSeen[static_cast<size_t>(rel)], binomialParent(rel)) << n << " " << rel;
      EXPECT_LT(binomialParent(rel), rel);
    }
    // Latency-optimal: the last rank has the buffer after exactly ceil(log2 n) rounds.
    EXPECT_EQ(maxRound + 1, ceilLog2(n)) << "n=" << n;
    // The rank that acknowledges to the root is a leaf.
    EXPECT_TRUE(childrenOf(n - 1, n).empty()) << n;
  }
}

// Scatter: each relative rank receives the blocks of its subtree from a parent that holds them.
// Ring cut open at the root: every rank sends only blocks it holds by then, ends with every
// block, and nothing goes back to the root.
TEST(BinomialPattern, ScatterThenCutRingDeliversEveryBlock) {
  for (int n = 2; n <= 40; ++n) {
    std::vector<std::set<int>> have(static_cast<size_t>(n));
    for (int b = 0; b < n; ++b) have[0].insert(b);
    for (int rel = 1; rel < n; ++rel) {
      const int parent = binomialParent(rel);
      for (int b = rel; b < binomialSubtreeEnd(rel, n); ++b) {
        EXPECT_TRUE(have[static_cast<size_t>(parent)].count(b)) << n << " " << rel << " " << b;
        have[static_cast<size_t>(rel)].insert(b);
      }
    }
    for (int rel = 0; rel < n; ++rel) EXPECT_TRUE(have[static_cast<size_t>(rel)].count(rel));
    // Ring steps in order: what rel sends at step t it holds by then.
    std::vector<std::set<int>> ring = have;
    for (int t = 0; t < n - 1; ++t) {
      auto before = ring;
      for (int rel = 0; rel < n; ++rel) {
        if (!sagRingSends(rel, n)) continue;
        const int b = ringAgSendBlock(rel, n, t);
        EXPECT_TRUE(before[static_cast<size_t>(rel)].count(b)) << n << " " << rel << " " << t;
        ASSERT_TRUE(sagRingReceives(rel + 1));
        EXPECT_EQ(ringAgRecvBlock(rel + 1, n, t), b);
        ring[static_cast<size_t>(rel + 1)].insert(b);
      }
    }
    for (int rel = 0; rel < n; ++rel) {
      EXPECT_EQ(ring[static_cast<size_t>(rel)].size(), static_cast<size_t>(n)) << n << " " << rel;
    }
    EXPECT_FALSE(sagRingReceives(0));
    EXPECT_FALSE(sagRingSends(n - 1, n));
  }
}

// Halving: rank r ends with block r reduced over every rank, each contribution once; it sends
// p - 1 blocks in log2 p steps (the ring's bytes). Doubling: every rank ends with every block.
TEST(BinomialPattern, HalvingReducesAndDoublingGathers) {
  for (int p : {1, 2, 4, 8, 16, 64}) {
    ASSERT_TRUE(isPowerOfTwo(p));
    // contrib[r][b]: ranks whose block b rank r's partial sum includes (each counted).
    std::vector<std::vector<std::multiset<int>>> contrib(static_cast<size_t>(p),
                                                         std::vector<std::multiset<int>>(p));
    for (int r = 0; r < p; ++r) {
      for (int b = 0; b < p; ++b) contrib[r][b] = {r};
    }
    std::vector<int> sent(static_cast<size_t>(p), 0);
    int steps = 0;
    for (int mask = p / 2; mask >= 1; mask /= 2, ++steps) {
      auto before = contrib;
      for (int r = 0; r < p; ++r) {
        const int partner = r ^ mask;
        // What r keeps is what its partner gives away.
        EXPECT_EQ(hdStart(r, mask), hdStart(partner ^ mask, mask));
        for (int b = hdStart(r, mask); b < hdStart(r, mask) + mask; ++b) {
          for (int q : before[partner][b]) contrib[r][b].insert(q);
        }
        sent[r] += mask;
      }
    }
    EXPECT_EQ(1 << steps, p);
    for (int r = 0; r < p; ++r) {
      std::multiset<int> all;
      for (int q = 0; q < p; ++q) all.insert(q);
      EXPECT_EQ(contrib[r][r], all) << "p=" << p << " r=" << r;
      EXPECT_EQ(sent[r], p - 1);
    }
    std::vector<std::set<int>> have(static_cast<size_t>(p));
    for (int r = 0; r < p; ++r) have[r] = {r};
    for (int mask = 1; mask < p; mask *= 2) {
      auto before = have;
      for (int r = 0; r < p; ++r) {
        for (int b = hdStart(r, mask); b < hdStart(r, mask) + mask; ++b) {
          EXPECT_TRUE(before[r].count(b));          // sends only what it holds
          EXPECT_FALSE(before[r ^ mask].count(b));  // and only what the partner lacks
          have[r ^ mask].insert(b);
        }
      }
    }
    for (int r = 0; r < p; ++r) EXPECT_EQ(have[r].size(), static_cast<size_t>(p));
  }
  for (int n : {0, 3, 5, 6, 12, 100}) EXPECT_FALSE(isPowerOfTwo(n)) << n;
  EXPECT_EQ(ceilPowerOfTwo(5), 8);
  EXPECT_EQ(ceilPowerOfTwo(8), 8);
  EXPECT_EQ(ceilPowerOfTwo(1), 1);
}

}  // namespace
}  // namespace chorus::algo
