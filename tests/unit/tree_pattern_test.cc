// Pure rank arithmetic of the double binary tree (algo/tree_pattern.h).
#include "algo/tree_pattern.h"
#include "algo/collectives.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

namespace chorus::algo {
namespace {

int floorLog2(int n) {
  int l = 0;
  while ((2 << l) <= n) ++l;
  return l;
}

bool isInterior(const TreeNode& t) { return t.child[0] >= 0 || t.child[1] >= 0; }

TEST(TreePattern, LabelsAreABijection) {
  for (int n = 1; n <= 64; ++n) {
    for (int tree = 0; tree < 2; ++tree) {
      std::set<int> labels;
      for (int r = 0; r < n; ++r) {
        const int p = treeLabel(r, n, tree);
        EXPECT_GE(p, 1);
        EXPECT_LE(p, n);
        EXPECT_EQ(treeRankOf(p, n, tree), r);
        labels.insert(p);
      }
      EXPECT_EQ(labels.size(), static_cast<size_t>(n)) << "n=" << n << " tree " << tree;
    }
  }
}

// Every rank but the root has exactly one parent, parent and child links agree, every rank
// reaches the root (so the tree spans all ranks and has no cycle), and depths are at most
// floor(log2 n).
TEST(TreePattern, TreesSpanAllRanksWithLogarithmicDepth) {
  for (int n = 1; n <= 64; ++n) {
    for (int tree = 0; tree < 2; ++tree) {
      SCOPED_TRACE("n=" + std::to_string(n) + " tree " + std::to_string(tree));
      const int root = treeRoot(n, tree);
      ASSERT_GE(root, 0);
      ASSERT_LT(root, n);
      std::vector<TreeNode> nodes;
      for (int r = 0; r < n; ++r) nodes.push_back(treeNode(r, n, tree));
      int roots = 0, edges = 0;
      std::vector<int> parentsSeen(static_cast<size_t>(n), 0);
      for (int r = 0; r < n; ++r) {
        const TreeNode& t = nodes[static_cast<size_t>(r)];
        if (t.parent < 0) {
          ++roots;
          EXPECT_EQ(r, root);
        } else {
          ASSERT_LT(t.parent, n);
          EXPECT_NE(t.parent, r);
          const TreeNode& p = nodes[static_cast<size_t>(t.parent)];
          EXPECT_TRUE(p.child[0] == r || p.child[1] == r) << "rank " << r;
          EXPECT_EQ(t.depth, p.depth + 1) << "rank " << r;
        }
        if (t.child[1] >= 0) {
          EXPECT_NE(t.child[0], t.child[1]);
        }
        for (int i = 0; i < 2; ++i) {
          const int c = t.child[i];
          if (c < 0) continue;
          ASSERT_LT(c, n);
          ++edges;
          ++parentsSeen[static_cast<size_t>(c)];
          EXPECT_EQ(nodes[static_cast<size_t>(c)].parent, r) << "rank " << r << " child " << c;
          EXPECT_EQ(t.childHeight[i], nodes[static_cast<size_t>(c)].height);
        }
        // A right child only next to a left one, so that child[0] is set on every interior rank.
        if (t.child[1] >= 0) {
          EXPECT_GE(t.child[0], 0);
        }
        // Heights: 0 for leaves, one more than the tallest child otherwise.
        int tallest = -1;
        for (int i = 0; i < 2; ++i) {
          if (t.child[i] >= 0) tallest = std::max(tallest, t.childHeight[i]);
        }
        EXPECT_EQ(t.height, tallest + 1) << "rank " << r;
        EXPECT_EQ(t.rootHeight, nodes[static_cast<size_t>(root)].height);
        EXPECT_LE(t.depth + t.height, t.rootHeight);
        EXPECT_LE(t.depth, floorLog2(n)) << "rank " << r;
        // Walk to the root: it must get there within floor(log2 n) steps.
        int steps = 0, q = r;
        while (q != root && steps <= n) {
          q = nodes[static_cast<size_t>(q)].parent;
          ASSERT_GE(q, 0) << "rank " << r << " does not reach the root";
          ++steps;
        }
        EXPECT_EQ(q, root);
        EXPECT_EQ(steps, t.depth);
      }
      EXPECT_EQ(roots, 1);
      EXPECT_EQ(edges, n - 1);
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(parentsSeen[static_cast<size_t>(r)], r == root ? 0 : 1) << "rank " << r;
      }
      EXPECT_EQ(nodes[static_cast<size_t>(root)].height, floorLog2(n));
    }
  }
}

// Exactly what tree_pattern.h promises: never interior in both trees; for even n interior in
// exactly one; for odd n >= 3 the same except rank 0, a leaf in both; n = 1 has no children.
TEST(TreePattern, InteriorInAtMostOneTree) {
  for (int n = 1; n <= 64; ++n) {
    SCOPED_TRACE("n=" + std::to_string(n));
    int interiorSlots = 0;
    for (int r = 0; r < n; ++r) {
      const bool a = isInterior(treeNode(r, n, 0));
      const bool b = isInterior(treeNode(r, n, 1));
      interiorSlots += (a ? 1 : 0) + (b ? 1 : 0);
      EXPECT_FALSE(a && b) << "rank " << r << " is interior in both trees";
      if (n == 1) {
        EXPECT_FALSE(a || b);
      } else if (n % 2 == 0 || r != 0) {
        EXPECT_TRUE(a != b) << "rank " << r << " is a leaf in both trees";
      } else {
        EXPECT_FALSE(a || b) << "rank 0 of an odd group should be a leaf in both trees";
      }
    }
    // A tree over n labels has floor(n/2) interior nodes.
    EXPECT_EQ(interiorSlots, 2 * (n / 2));
    if (n >= 2) {
      EXPECT_NE(treeRoot(n, 0), treeRoot(n, 1));
    }
  }
}

TEST(TreePattern, SmallTreesByHand) {
  // n = 2: each rank is the other's parent in one tree.
  EXPECT_EQ(treeNode(0, 2, 0).parent, 1);
  EXPECT_EQ(treeNode(1, 2, 1).parent, 0);
  // n = 6, tree 0 (labels r+1): root label 4 (rank 3) with children labels 2 and 6 (ranks 1, 5),
  // label 6 has the single child 5 (rank 4).
  TreeNode root = treeNode(3, 6, 0);
  EXPECT_EQ(root.parent, -1);
  EXPECT_EQ(root.child[0], 1);
  EXPECT_EQ(root.child[1], 5);
  EXPECT_EQ(root.height, 2);
  TreeNode five = treeNode(5, 6, 0);
  EXPECT_EQ(five.child[0], 4);
  EXPECT_EQ(five.child[1], -1);
  EXPECT_EQ(five.depth, 1);
  // n = 7, tree 0: label 4's right subtree is 5, 6, 7 with root 6.
  EXPECT_EQ(treeNode(3, 7, 0).child[1], 5);
  // n = 5, tree 0: label 4 has no label 6, so label 5 (rank 4) hangs on label 4 (rank 3).
  EXPECT_EQ(treeNode(4, 5, 0).parent, 3);
  EXPECT_EQ(treeNode(3, 5, 0).child[1], 4);
}

TEST(TreePattern, ChosenByItsName) {
  Options o;
  o.algorithm = parseAlgorithmSetting("tree");
  for (int n : {2, 3, 7, 64}) {
    EXPECT_EQ(selectAlgorithm(CollectiveKind::kAllReduce, 8, n, o), AlgorithmId::kDoubleTree);
    EXPECT_EQ(selectAlgorithm(CollectiveKind::kAllReduce, 64 << 20, n, o),
              AlgorithmId::kDoubleTree);
  }
  EXPECT_EQ(selectAlgorithm(CollectiveKind::kAllReduce, 8, 1, o), AlgorithmId::kNone);
  EXPECT_STREQ(toString(AlgorithmId::kDoubleTree), "tree");
}

}  // namespace
}  // namespace chorus::algo
