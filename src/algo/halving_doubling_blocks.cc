// Reduce-scatter by recursive halving and all-gather by recursive doubling, for power-of-two
// groups: log2 N steps each instead of the ring's N - 1, with the same bytes per rank
// ((N-1)/N of the buffer). The blocks are the API's: block r, `blockCount` elements, belongs to
// rank r (algo/binomial_pattern.h has the arithmetic). Each step's transfer is cut into
// segments of g.segmentBytes, and every received segment is reduced as soon as it lands.
#include "algo/binomial_pattern.h"
#include "algo/collectives.h"
#include "reduce/internal_types.h"
#include "reduce/reduce.h"

#include <chorus/error.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace chorus::algo {
namespace {

size_t segmentsOf(size_t count, size_t segElems) { return (count + segElems - 1) / segElems; }

void requirePowerOfTwo(const Group& g, const char* what) {
  if (isPowerOfTwo(g.size)) return;
  throw Error(ErrorCode::kInvalidArgument,
              std::string(what) + " needs a power-of-two number of ranks (this group has " +
                  std::to_string(g.size) + ")");
}

// One step's messages with a partner, both ways `count` elements cut into segments.
struct Exchange {
  const Group& g;
  size_t esize;
  size_t segElems;
  std::vector<transport::Request>& sends;
  std::vector<transport::Request>& recvs;

  // Posts the step; returns the number of segments each way.
  size_t post(int partner, uint8_t* recvAt, const uint8_t* sendAt, size_t count, uint32_t step) {
    const size_t segs = segmentsOf(count, segElems);
    for (size_t k = 0; k < segs; ++k) {
      const size_t e0 = k * segElems, c = std::min(segElems, count - e0);
      g.tx->postRecv(recvs[k], partner, recvAt + e0 * esize, c * esize, step);
    }
    for (size_t k = 0; k < segs; ++k) {
      const size_t e0 = k * segElems, c = std::min(segElems, count - e0);
      g.tx->postSend(sends[k], partner, sendAt + e0 * esize, c * esize, step);
    }
    return segs;
  }
};

}  // namespace

void halvingReduceScatter(const Group& g, const void* in, void* out, size_t blockCount,
                          DataType dtype, ReduceOp op) {
  requirePowerOfTwo(g, "reduce_scatter 'halving'");
  const int p = g.size, r = g.rank;
  const size_t esize = reduce::elementSize(dtype);
  const size_t blockBytes = blockCount * esize;
  const size_t segElems = std::max<size_t>(1, g.segmentBytes / esize);
  const size_t maxSegs = segmentsOf(static_cast<size_t>(p / 2) * blockCount, segElems);
  Exchange x{g, esize, segElems, g.scratch->sends(maxSegs), g.scratch->recvs(maxSegs)};
  const reduce::ReduceFn fn = reduce::reduceFn(dtype, op);
  auto* result = static_cast<uint8_t*>(out);
  // Partial sums, at their blocks' places in a buffer of p blocks (the output holds one block,
  // and the input must stay as it is); what the partner sends lands in `theirs`.
  uint8_t* acc = g.scratch->bytes(blockBytes * static_cast<size_t>(p));
  uint8_t* theirs = g.scratch->second(blockBytes * static_cast<size_t>(p / 2));
  const uint8_t* src = static_cast<const uint8_t*>(in);  // this rank's partial sums so far
  uint32_t step = 0;
  for (int mask = p / 2; mask >= 1; mask /= 2, ++step) {
    const int partner = r ^ mask;
    const size_t keep = static_cast<size_t>(hdStart(r, mask)) * blockCount;
    const size_t give = static_cast<size_t>(hdStart(partner, mask)) * blockCount;
    const size_t elems = static_cast<size_t>(mask) * blockCount;
    // The last step's sum is block r itself: straight into the output (in place, the output is
    // block r of the input, read for the last time as this very operand).
    uint8_t* dst = mask == 1 ? result : acc + keep * esize;
    const size_t segs = x.post(partner, theirs, src + give * esize, elems, step);
    for (size_t k = 0; k < segs; ++k) {
      g.wait(x.recvs[k]);
      const size_t e0 = k * segElems, c = std::min(segElems, elems - e0);
      const uint8_t* mine = src + (keep + e0) * esize;
      const uint8_t* other = theirs + e0 * esize;
      // Lower rank first, so the operand order is fixed by the ranks alone.
      if (partner < r) {
        fn(dst + e0 * esize, other, mine, c);
      } else {
        fn(dst + e0 * esize, mine, other, c);
      }
    }
    for (size_t k = 0; k < segs; ++k) g.wait(x.sends[k]);
    src = acc;
  }
  // Block r is final here and nowhere else: the average divides once.
  if (op == ReduceOp::kAvg) reduce::divide(result, blockCount, dtype, p);
}

void doublingAllGather(const Group& g, void* out, size_t blockCount, DataType dtype) {
  requirePowerOfTwo(g, "all_gather 'doubling'");
  const int p = g.size, r = g.rank;
  const size_t esize = reduce::elementSize(dtype);
  const size_t segElems = std::max<size_t>(1, g.segmentBytes / esize);
  const size_t maxSegs = segmentsOf(static_cast<size_t>(p / 2) * blockCount, segElems);
  Exchange x{g, esize, segElems, g.scratch->sends(maxSegs), g.scratch->recvs(maxSegs)};
  auto* data = static_cast<uint8_t*>(out);
  uint32_t step = 0;
  for (int mask = 1; mask < p; mask *= 2, ++step) {
    const int partner = r ^ mask;
    const size_t mine = static_cast<size_t>(hdStart(r, mask)) * blockCount;
    const size_t theirs = static_cast<size_t>(hdStart(partner, mask)) * blockCount;
    const size_t elems = static_cast<size_t>(mask) * blockCount;
    const size_t segs = x.post(partner, data + theirs * esize, data + mine * esize, elems, step);
    for (size_t k = 0; k < segs; ++k) g.wait(x.recvs[k]);
    for (size_t k = 0; k < segs; ++k) g.wait(x.sends[k]);
  }
}

}  // namespace chorus::algo
