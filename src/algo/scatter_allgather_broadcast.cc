// Broadcast for large buffers over many ranks (van de Geijn): the root scatters the buffer's N
// balanced blocks down a binomial tree (each relative rank receives the blocks of its subtree),
// then a ring all-gather, cut open at the root, gives every rank the other blocks
// (algo/binomial_pattern.h). About 2 S beta in all, and no pipeline fill of N - 2 segments as in
// the chain. Every transfer lands straight in the user's buffer, cut into segments of
// g.segmentBytes.
#include "algo/binomial_pattern.h"
#include "algo/collectives.h"
#include "reduce/internal_types.h"

#include <algorithm>

namespace chorus::algo {
namespace {

constexpr uint32_t kRingStep = 1u << 30;  // ring messages' steps start here (scatter: 0, 1, ...)
constexpr uint32_t kAckStep = ~uint32_t{0};

size_t segmentsOf(size_t count, size_t segElems) { return (count + segElems - 1) / segElems; }

}  // namespace

void scatterAllGatherBroadcast(const Group& g, void* buf, size_t count, DataType dtype, int root) {
  const int n = g.size;
  const int rel = rootRelative(g.rank, root, n);
  const size_t esize = reduce::elementSize(dtype);
  const size_t segElems = std::max<size_t>(1, g.segmentBytes / esize);
  auto* data = static_cast<uint8_t*>(buf);
  // Elements of the relative blocks [b0, b1).
  auto range = [&](int b0, int b1) {
    const Block a = balancedBlock(count, n, b0);
    const Block z = balancedBlock(count, n, b1 - 1);
    return Block{a.offset, z.offset + z.count - a.offset};
  };
  const int prev = fromRootRelative(rel - 1, root, n);
  const int next = fromRootRelative(rel + 1, root, n);

  // Scatter: what this rank receives, and what each child gets.
  const Block mine = range(rel, binomialSubtreeEnd(rel, n));
  const size_t recvSegs = rel == 0 ? 0 : segmentsOf(mine.count, segElems);
  struct Child {
    int rank;
    Block blocks;
  };
  Child children[32];
  int childCount = 0;
  size_t scatterSends = 0;
  for (int m = binomialMask(rel, n) / 2; m >= 1; m /= 2) {
    if (rel + m >= n) continue;
    const Block b = range(rel + m, binomialSubtreeEnd(rel + m, n));
    children[childCount++] = Child{fromRootRelative(rel + m, root, n), b};
    scatterSends += segmentsOf(b.count, segElems);
  }
  // Ring: units (step t, segment k) of the largest block.
  const size_t blockSegs =
      std::max<size_t>(1, segmentsOf(balancedBlock(count, n, 0).count, segElems));
  const size_t units = static_cast<size_t>(n - 1) * blockSegs;
  auto& sends = g.scratch->sends(scatterSends + units);
  auto& recvs = g.scratch->recvs(recvSegs + units);

  // Posts segment k of block `block` to or from `peer`; nothing when the block has no elements
  // there (both ends agree on that from the block sizes alone).
  auto ringSeg = [&](bool send, int block, size_t k, transport::Request& req, int peer,
                     uint32_t step) {
    const Block b = balancedBlock(count, n, block);
    const size_t e0 = k * segElems;
    if (b.count <= e0) return;
    const size_t bytes = std::min(segElems, b.count - e0) * esize;
    uint8_t* at = data + (b.offset + e0) * esize;
    if (send) {
      g.tx->postSend(req, peer, at, bytes, step);
    } else {
      g.tx->postRecv(req, peer, at, bytes, step);
    }
  };

  if (rel != 0) {
    const int parent = fromRootRelative(binomialParent(rel), root, n);
    for (size_t k = 0; k < recvSegs; ++k) {
      const size_t e0 = k * segElems;
      g.tx->postRecv(recvs[k], parent, data + (mine.offset + e0) * esize,
                     std::min(segElems, mine.count - e0) * esize, static_cast<uint32_t>(k));
    }
    for (size_t k = 0; k < recvSegs; ++k) g.wait(recvs[k]);
  }
  size_t s = 0;
  for (int c = 0; c < childCount; ++c) {
    const Block b = children[c].blocks;
    for (size_t k = 0, segs = segmentsOf(b.count, segElems); k < segs; ++k, ++s) {
      const size_t e0 = k * segElems;
      g.tx->postSend(sends[s], children[c].rank, data + (b.offset + e0) * esize,
                     std::min(segElems, b.count - e0) * esize, static_cast<uint32_t>(k));
    }
  }

  // The ring rewrites some blocks the scatter moved (with the same bytes): let the scatter's
  // transfers finish before any ring receive is posted.
  for (size_t i = 0; i < scatterSends; ++i) g.wait(sends[i]);

  // All-gather.
  transport::Request* ringSends = sends.data() + scatterSends;
  transport::Request* ringRecvs = recvs.data() + recvSegs;
  const bool sending = sagRingSends(rel, n);
  auto postRingSend = [&](size_t u) {
    const int t = static_cast<int>(u / blockSegs);
    ringSeg(true, ringAgSendBlock(rel, n, t), u % blockSegs, ringSends[u], next,
            kRingStep + static_cast<uint32_t>(u));
  };
  if (sagRingReceives(rel)) {
    for (size_t u = 0; u < units; ++u) {
      const int t = static_cast<int>(u / blockSegs);
      ringSeg(false, ringAgRecvBlock(rel, n, t), u % blockSegs, ringRecvs[u], prev,
              kRingStep + static_cast<uint32_t>(u));
    }
  }
  if (rel == 0) {
    // The root holds every block: nothing to wait for.
    for (size_t u = 0; u < units; ++u) postRingSend(u);
  } else {
    if (sending) {
      for (size_t k = 0; k < blockSegs; ++k) postRingSend(k);  // step 0: this rank's own block
    }
    // Unit (t, k) forwards what unit (t - 1, k) received.
    for (size_t u = 0; u < units; ++u) {
      g.wait(ringRecvs[u]);
      if (sending && u + blockSegs < units) postRingSend(u + blockSegs);
    }
  }
  for (auto& r : sends) g.wait(r);

  // The root receives a message too: ranks that disagree on the root detect it in this call.
  lastRankAcksRoot(g, root, kAckStep);
}

}  // namespace chorus::algo
