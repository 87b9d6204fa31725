// Bandwidth-optimal all-reduce in 2 log2(p) steps (Rabenseifner): a reduce-scatter by recursive
// halving, then an all-gather by recursive doubling. Same bytes per rank as the ring, far fewer
// latencies, so it wins from mid sizes up while the world size is a power of two. Other sizes
// fold their extra ranks in first, as recursive doubling does.
#include "algo/collectives.h"
#include "algo/fold.h"
#include "algo/ring_pattern.h"
#include "reduce/internal_types.h"
#include "reduce/reduce.h"

#include <algorithm>

namespace chorus::algo {
namespace {

// Elements [first, last) of the blocks [b0, b1) of a buffer split into p blocks.
struct Range {
  size_t first;
  size_t count;
};
Range blockRange(size_t total, int p, int b0, int b1) {
  Block a = balancedBlock(total, p, b0);
  Block z = balancedBlock(total, p, b1 - 1);
  return Range{a.offset, z.offset + z.count - a.offset};
}

size_t segmentsOf(size_t count, size_t segElems) { return (count + segElems - 1) / segElems; }

}  // namespace

void halvingDoublingAllReduce(const Group& g, const void* in, void* out, size_t count,
                              DataType dtype, ReduceOp op) {
  const size_t esize = reduce::elementSize(dtype);
  const size_t bytes = count * esize;
  auto* data = static_cast<uint8_t*>(out);
  const auto* input = static_cast<const uint8_t*>(in);
  const RdLayout layout = rdLayout(g.size);
  const int p2 = layout.p2;
  const int r = g.rank;
  const int core = rdCoreRank(r, layout);
  const size_t segElems = std::max<size_t>(1, g.segmentBytes / esize);
  reduce::ReduceFn fn = reduce::reduceFn(dtype, op);
  // The largest range a step moves is half the blocks (the first halving step).
  const Range half = blockRange(count, p2, 0, std::max(1, p2 / 2));
  const size_t maxSegs = std::max<size_t>(1, segmentsOf(half.count, segElems));
  auto& sends = g.scratch->sends(maxSegs);
  auto& recvs = g.scratch->recvs(maxSegs);
  transport::Request& send = sends[0];
  transport::Request& recv = recvs[0];
  uint32_t step = 0;

  // This rank's current partial sums: the input until the first reduction.
  const uint8_t* src = input;
  switch (foldIn(g, layout, input, data, count, dtype, fn, send, recv)) {
    case FoldRole::kSatOut:
      return;
    case FoldRole::kAbsorbed:
      src = data;
      break;
    case FoldRole::kCore:
      break;
  }
  ++step;

  // Posts one step's messages with `partner`, both ways cut into segments: recvCount elements
  // land at recvAt, sendCount elements go from sendAt. Returns the number of receives.
  auto exchange = [&](int partner, uint8_t* recvAt, size_t recvCount, const uint8_t* sendAt,
                      size_t sendCount, uint32_t stepTag) {
    const size_t recvSegs = segmentsOf(recvCount, segElems);
    for (size_t k = 0; k < recvSegs; ++k) {
      size_t e0 = k * segElems, n = std::min(segElems, recvCount - e0);
      g.tx->postRecv(recvs[k], partner, recvAt + e0 * esize, n * esize, stepTag);
    }
    for (size_t k = 0, segs = segmentsOf(sendCount, segElems); k < segs; ++k) {
      size_t e0 = k * segElems, n = std::min(segElems, sendCount - e0);
      g.tx->postSend(sends[k], partner, sendAt + e0 * esize, n * esize, stepTag);
    }
    return recvSegs;
  };

  // Reduce-scatter by recursive halving: at distance `mask`, keep the half of the current block
  // range on this rank's side of the bit, send the other half to the partner, and reduce the
  // partner's copy of the kept half into the output. Ends owning block `core`.
  uint8_t* tmp = g.scratch->bytes(half.count * esize);
  int lo = 0;
  for (int mask = p2 / 2; mask >= 1; mask /= 2, ++step) {
    const int partnerCore = core ^ mask;
    const int partner = rdRealRank(partnerCore, layout);
    const bool upper = (core & mask) != 0;
    const int keep0 = upper ? lo + mask : lo;
    const int give0 = upper ? lo : lo + mask;
    const Range keep = blockRange(count, p2, keep0, keep0 + mask);
    const Range give = blockRange(count, p2, give0, give0 + mask);
    const size_t recvSegs =
        exchange(partner, tmp, keep.count, src + give.first * esize, give.count, step);
    const size_t sendSegs = segmentsOf(give.count, segElems);
    // Reduce each segment as it lands, while the later ones are still on the wire.
    for (size_t k = 0; k < recvSegs; ++k) {
      g.wait(recvs[k]);
      size_t e0 = k * segElems, n = std::min(segElems, keep.count - e0);
      uint8_t* mine = data + (keep.first + e0) * esize;
      const uint8_t* own = src + (keep.first + e0) * esize;
      const uint8_t* theirs = tmp + e0 * esize;
      if (partnerCore < core) {
        fn(mine, theirs, own, n);
      } else {
        fn(mine, own, theirs, n);
      }
    }
    for (size_t k = 0; k < sendSegs; ++k) g.wait(sends[k]);
    src = data;
    lo = keep0;
  }
  // p2 >= 2, so the loop above ran and block `core` of the output holds the final values.
  const Range own = blockRange(count, p2, core, core + 1);
  if (op == ReduceOp::kAvg) reduce::divide(data + own.first * esize, own.count, dtype, g.size);

  // All-gather by recursive doubling: swap the owned range with the partner's, straight into
  // the output buffer.
  for (int mask = 1; mask < p2; mask *= 2, ++step) {
    const int partnerCore = core ^ mask;
    const int partner = rdRealRank(partnerCore, layout);
    const int mine0 = core & ~(mask - 1);
    const int theirs0 = partnerCore & ~(mask - 1);
    const Range mine = blockRange(count, p2, mine0, mine0 + mask);
    const Range theirs = blockRange(count, p2, theirs0, theirs0 + mask);
    const size_t recvSegs = exchange(partner, data + theirs.first * esize, theirs.count,
                                     data + mine.first * esize, mine.count, step);
    const size_t sendSegs = segmentsOf(mine.count, segElems);
    for (size_t k = 0; k < recvSegs; ++k) g.wait(recvs[k]);
    for (size_t k = 0; k < sendSegs; ++k) g.wait(sends[k]);
  }

  foldOut(g, layout, data, bytes, send);
}

}  // namespace chorus::algo
