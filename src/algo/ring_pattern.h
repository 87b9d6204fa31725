// Pure rank and block arithmetic of the ring algorithms (unit-tested apart from any I/O).
#pragma once

#include <cstddef>

namespace chorus::algo {

inline int ringMod(long long a, int n) { return static_cast<int>(((a % n) + n) % n); }

// Block i of `total` elements split into n nearly equal blocks (the first total % n get one more).
struct Block {
  size_t offset;
  size_t count;
};
inline Block balancedBlock(size_t total, int n, int i) {
  size_t base = total / static_cast<size_t>(n);
  size_t extra = total % static_cast<size_t>(n);
  size_t ui = static_cast<size_t>(i);
  return Block{ui * base + (ui < extra ? ui : extra), base + (ui < extra ? 1 : 0)};
}

// Whether a ring all-reduce of `bytes` over n ranks runs both ways round the ring, given
// Tuning::ringBidirectionalBytes (0: never). Two ranks have one peer each way: always one way.
inline bool ringRunsBothWays(size_t bytes, int n, size_t fromBytes) {
  return n >= 3 && fromBytes > 0 && bytes >= fromBytes;
}

// Reduce-scatter step t (0..n-2) on rank r: send block sendRs, receive block recvRs, so that
// after n-1 steps rank r holds the fully reduced block r.
inline int ringRsSendBlock(int r, int n, int t) { return ringMod(r - t - 1, n); }
inline int ringRsRecvBlock(int r, int n, int t) { return ringMod(r - t - 2, n); }
// All-gather step t (0..n-2) on rank r, which starts holding block r.
inline int ringAgSendBlock(int r, int n, int t) { return ringMod(r - t, n); }
inline int ringAgRecvBlock(int r, int n, int t) { return ringMod(r - t - 1, n); }

// Recursive doubling over a non-power-of-two group: the first 2*extra ranks pair up (even ones
// hand their data to the odd neighbour and sit out); the remaining p2 ranks exchange.
struct RdLayout {
  int p2;     // largest power of two <= size
  int extra;  // size - p2
};
inline RdLayout rdLayout(int size) {
  int p2 = 1;
  while (p2 * 2 <= size) p2 *= 2;
  return RdLayout{p2, size - p2};
}
// Rank inside the power-of-two core, or -1 for ranks that sit out.
inline int rdCoreRank(int r, const RdLayout& l) {
  if (r < 2 * l.extra) return (r % 2 == 1) ? r / 2 : -1;
  return r - l.extra;
}
inline int rdRealRank(int core, const RdLayout& l) {
  return core < l.extra ? core * 2 + 1 : core + l.extra;
}

}  // namespace chorus::algo
