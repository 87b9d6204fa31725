// Pure rank and block arithmetic of the binomial-tree broadcast, the scatter + all-gather
// broadcast and the recursive halving / doubling reduce-scatter and all-gather (unit-tested apart
// from any I/O).
#pragma once

#include "algo/ring_pattern.h"

namespace chorus::algo {

inline bool isPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

// Smallest power of two >= n (n >= 1).
inline int ceilPowerOfTwo(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// Rank relative to the root (the root is 0) and back.
inline int rootRelative(int r, int root, int n) { return ringMod(r - root, n); }
inline int fromRootRelative(int rel, int root, int n) { return ringMod(rel + root, n); }

// The binomial tree over relative ranks 0..n-1: rel > 0 hangs on rel minus its lowest set bit,
// and its subtree is the relative ranks [rel, binomialSubtreeEnd(rel, n)). Its children are
// rel + m for m = mask/2, mask/4, ..., 1 (mask = binomialMask) while rel + m < n, largest subtree
// first; the child rel + m owns the subtree [rel + m, min(rel + 2m, n)). Depth of rel: its
// number of set bits, at most ceil(log2 n).
inline int binomialParent(int rel) { return rel == 0 ? -1 : rel - (rel & -rel); }
inline int binomialMask(int rel, int n) { return rel == 0 ? ceilPowerOfTwo(n) : (rel & -rel); }
inline int binomialSubtreeEnd(int rel, int n) {
  const long long end = static_cast<long long>(rel) + binomialMask(rel, n);
  return end < n ? static_cast<int>(end) : n;
}
inline int binomialDepth(int rel) {
  int d = 0;
  for (; rel != 0; rel &= rel - 1) ++d;
  return d;
}
// Round (0-based) in which rel receives the buffer when every rank sends to its children one
// after the other, largest subtree first: its parent's round + 1 + how many siblings go first.
inline int binomialRound(int rel, int n) {
  if (rel == 0) return -1;
  const int parent = binomialParent(rel);
  const int mine = rel - parent;
  int before = 0;
  for (int m = binomialMask(parent, n) / 2; m > mine; m /= 2) {
    if (parent + m < n) ++before;
  }
  return binomialRound(parent, n) + 1 + before;
}

// Scatter + all-gather broadcast: the buffer is n balanced blocks, block j belongs to relative
// rank j. The scatter hands each relative rank the blocks of its binomial subtree. The all-gather
// is the ring's, cut open at the root: in step t (0..n-2) relative rank rel > 0 receives block
// ringAgRecvBlock(rel, n, t) from rel - 1, and every rank but n - 1 sends ringAgSendBlock(rel, n,
// t) to rel + 1 (the root sends from its full buffer, so nothing goes back to it).
inline bool sagRingSends(int rel, int n) { return rel != n - 1; }
inline bool sagRingReceives(int rel) { return rel != 0; }

// Recursive halving (reduce-scatter) and doubling (all-gather) over a power-of-two group, in
// blocks: at distance `mask` rank r's partner is r ^ mask. Halving visits mask = p/2, ..., 1 and
// rank r keeps the `mask` blocks from hdStart(r, mask), sending the `mask` blocks from
// hdStart(r ^ mask, mask): it ends holding block r. Doubling visits mask = 1, ..., p/2 and rank r
// sends the `mask` blocks from hdStart(r, mask) it already holds and receives the `mask` blocks
// from hdStart(r ^ mask, mask): it ends holding every block.
inline int hdStart(int r, int mask) { return r & ~(mask - 1); }

}  // namespace chorus::algo
