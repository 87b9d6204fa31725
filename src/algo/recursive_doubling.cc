// Latency-optimal all-reduce for small buffers: log2(p) exchanges of the whole buffer.
#include "algo/collectives.h"
#include "algo/copy.h"
#include "algo/fold.h"
#include "algo/ring_pattern.h"
#include "reduce/internal_types.h"
#include "reduce/reduce.h"

namespace chorus::algo {

void recursiveDoublingAllReduce(const Group& g, const void* in, void* out, size_t count,
                                DataType dtype, ReduceOp op) {
  const size_t bytes = count * reduce::elementSize(dtype);
  if (in != out) copyBytes(dtype, out, in, bytes);
  auto* data = static_cast<uint8_t*>(out);
  uint8_t* tmp = g.scratch->bytes(bytes);
  reduce::ReduceFn fn = reduce::reduceFn(dtype, op);
  const RdLayout layout = rdLayout(g.size);
  const int r = g.rank;
  const int core = rdCoreRank(r, layout);
  transport::Request send, recv;
  uint32_t step = 0;

  if (foldIn(g, layout, data, data, count, dtype, fn, send, recv) == FoldRole::kSatOut) return;
  ++step;
  // Exchange with partners at distance 1, 2, 4, ... Both partners combine (lower op higher),
  // so they compute identical bits.
  for (int mask = 1; mask < layout.p2; mask <<= 1) {
    int partnerCore = core ^ mask;
    int partner = rdRealRank(partnerCore, layout);
    g.tx->postRecv(recv, partner, tmp, bytes, step);
    g.tx->postSend(send, partner, data, bytes, step);
    g.wait(recv);
    g.wait(send);
    if (partnerCore < core) {
      fn(data, tmp, data, count);
    } else {
      fn(data, data, tmp, count);
    }
    ++step;
  }
  if (op == ReduceOp::kAvg) reduce::divide(data, count, dtype, g.size);
  foldOut(g, layout, data, bytes, send);
}

}  // namespace chorus::algo
