// Latency-optimal broadcast for small buffers: a binomial tree rooted at the root
// (algo/binomial_pattern.h), ceil(log2 N) rounds. Each rank forwards every segment to its
// children (largest subtree first) as soon as it arrives, so large forced buffers pipeline too.
//
// The tree's links depend on the root, so ranks that disagree on the root could exchange no
// message at all, or some could finish having heard only from ranks that agree with them. Two
// empty messages close that gap: every rank sends a token to rank r+1 at the start (a link that
// does not depend on the root, so a disagreeing neighbour is detected) and checks the one from
// r-1 before it forwards anything or returns; and the last relative rank tells the root it has
// everything, so the root's completion depends on the ranks on that path.
#include "algo/binomial_pattern.h"
#include "algo/collectives.h"

#include <algorithm>

namespace chorus::algo {
namespace {

constexpr uint32_t kTokenStep = ~uint32_t{0};

}  // namespace

void binomialBroadcast(const Group& g, void* buf, size_t bytes, int root) {
  const int n = g.size;
  const int rel = rootRelative(g.rank, root, n);
  const size_t seg = std::max<size_t>(1, g.segmentBytes);
  const size_t segs = (bytes + seg - 1) / seg;
  auto* data = static_cast<uint8_t*>(buf);
  auto len = [&](size_t k) { return std::min(seg, bytes - k * seg); };

  int children[32];
  int childCount = 0;
  for (int m = binomialMask(rel, n) / 2; m >= 1; m /= 2) {
    if (rel + m < n) children[childCount++] = fromRootRelative(rel + m, root, n);
  }
  auto& sends = g.scratch->sends(segs * static_cast<size_t>(childCount));
  auto& recvs = g.scratch->recvs(rel == 0 ? 0 : segs);
  auto forward = [&](size_t k) {
    for (int c = 0; c < childCount; ++c) {
      g.tx->postSend(sends[k * static_cast<size_t>(childCount) + static_cast<size_t>(c)],
                     children[c], data + k * seg, len(k), static_cast<uint32_t>(k));
    }
  };

  transport::Request tokenSend, tokenRecv;
  g.tx->postRecv(tokenRecv, ringMod(g.rank - 1, n), nullptr, 0, kTokenStep);
  g.tx->postSend(tokenSend, ringMod(g.rank + 1, n), nullptr, 0, kTokenStep);
  if (rel == 0) {
    for (size_t k = 0; k < segs; ++k) forward(k);
  } else {
    // Receive straight into the user's buffer: no copy.
    const int parent = fromRootRelative(binomialParent(rel), root, n);
    for (size_t k = 0; k < segs; ++k) {
      g.tx->postRecv(recvs[k], parent, data + k * seg, len(k), static_cast<uint32_t>(k));
    }
    // Sent at the start by r-1: here long before the data (a hop from the parent) in general.
    g.wait(tokenRecv);
    for (size_t k = 0; k < segs; ++k) {
      g.wait(recvs[k]);
      forward(k);
    }
  }
  for (auto& s : sends) g.wait(s);
  g.wait(tokenRecv);
  g.wait(tokenSend);
  // As in the chain: the last relative rank (always a leaf) tells the root it has everything.
  lastRankAcksRoot(g, root, static_cast<uint32_t>(segs));
}

void lastRankAcksRoot(const Group& g, int root, uint32_t step) {
  const int n = g.size;
  const int rel = rootRelative(g.rank, root, n);
  transport::Request ack;
  if (rel == n - 1) {
    g.tx->postSend(ack, root, nullptr, 0, step);
    g.wait(ack);
  } else if (rel == 0) {
    g.tx->postRecv(ack, fromRootRelative(n - 1, root, n), nullptr, 0, step);
    g.wait(ack);
  }
}

}  // namespace chorus::algo
