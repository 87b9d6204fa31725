// Pure rank arithmetic of the double binary tree (unit-tested apart from any I/O).
//
// One tree shape over the labels 1..n: the in-order binary tree in which label p has height
// ctz(p). Label p with lowest set bit b > 1 has the left child p - b/2 and the right child
// p + c, where c is the largest of b/2, b/4, ..., 1 with p + c <= n (none if there is no such c);
// odd labels have no children. The root is the largest power of two <= n. It is the complete
// in-order tree over 1..2^K-1 (2^K > n) with the labels above n removed and each orphan hung
// on its nearest remaining ancestor, so every depth is at most floor(log2 n).
//
// Because a label has a child exactly when it is even, the two trees of the double tree place
// the ranks on labels of opposite parity:
//   tree 0: rank r has label r + 1 (interior exactly when r is odd);
//   tree 1, n even: label n - r (interior exactly when r is even);
//   tree 1, n odd: label r for r >= 1 and label n for rank 0 (interior exactly when r is even
//   and not 0).
// What holds, for every n >= 1: no rank is interior in both trees, and for n >= 2 the roots
// differ. For even n every rank is interior in exactly one tree and a leaf in the other. For
// odd n >= 3 the same holds for every rank but 0, which is a leaf in both: a tree over an odd
// number of labels has only (n-1)/2 interior nodes, so two of them cannot cover all n ranks.
// For n = 1 the single rank is the childless root of both trees.
#pragma once

namespace chorus::algo {

// Label arithmetic over 1..n.
inline int treeLowBit(int p) { return p & -p; }

inline int treeRootLabel(int n) {
  int r = 1;
  while (r <= n / 2) r *= 2;
  return r;
}

// Height of label p (0 for a leaf): its chain of left children always exists (those labels are
// below p), and no subtree is taller than in the complete tree.
inline int treeLabelHeight(int p) {
  int h = 0;
  while ((p & 1) == 0) {
    p >>= 1;
    ++h;
  }
  return h;
}

// Parent label of p, or 0 for the root: the nearest ancestor in the complete tree that is <= n.
inline int treeLabelParent(int p, int n) {
  if (p == treeRootLabel(n)) return 0;
  int q = p;
  for (;;) {
    const int b = treeLowBit(q);
    q = (q & (2 * b)) != 0 ? q - b : q + b;
    if (q <= n) return q;
  }
}

// Children labels of p (0 where none); child[0] < p < child[1].
inline void treeLabelChildren(int p, int n, int child[2]) {
  child[0] = child[1] = 0;
  const int b = treeLowBit(p);
  if (b == 1) return;
  child[0] = p - b / 2;
  for (int c = b / 2; c >= 1; c /= 2) {
    if (p + c <= n) {
      child[1] = p + c;
      return;
    }
  }
}

// Rank <-> label in tree 0 or 1.
inline int treeLabel(int r, int n, int tree) {
  if (tree == 0) return r + 1;
  if (n % 2 == 0) return n - r;
  return r == 0 ? n : r;
}
inline int treeRankOf(int label, int n, int tree) {
  if (tree == 0) return label - 1;
  if (n % 2 == 0) return n - label;
  return label == n ? 0 : label;
}

inline int treeRoot(int n, int tree) { return treeRankOf(treeRootLabel(n), n, tree); }

// Rank r's place in one tree. Ranks are -1 where there is none; child[0] is the child whose
// partial result is the left operand of r's own value, child[1] the right one.
struct TreeNode {
  int parent = -1;
  int child[2] = {-1, -1};
  int childHeight[2] = {0, 0};
  int height = 0;      // 0 for a leaf
  int depth = 0;       // 0 for the root
  int rootHeight = 0;  // height of the whole tree
};

inline TreeNode treeNode(int r, int n, int tree) {
  TreeNode t;
  const int p = treeLabel(r, n, tree);
  const int up = treeLabelParent(p, n);
  if (up != 0) t.parent = treeRankOf(up, n, tree);
  int child[2];
  treeLabelChildren(p, n, child);
  for (int i = 0; i < 2; ++i) {
    if (child[i] == 0) continue;
    t.child[i] = treeRankOf(child[i], n, tree);
    t.childHeight[i] = treeLabelHeight(child[i]);
  }
  t.height = treeLabelHeight(p);
  for (int q = up; q != 0; q = treeLabelParent(q, n)) ++t.depth;
  t.rootHeight = treeLabelHeight(treeRootLabel(n));
  return t;
}

}  // namespace chorus::algo
