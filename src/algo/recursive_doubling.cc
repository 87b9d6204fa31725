// Latency-optimal all-reduce for small buffers: log2(p) exchanges of the whole buffer.
#include "algo/collectives.h"
#include "algo/ring_pattern.h"
#include "reduce/reduce.h"

#include <cstring>

namespace chorus::algo {

void recursiveDoublingAllReduce(const Group& g, const void* in, void* out, size_t count,
                                DataType dtype, ReduceOp op) {
  const size_t bytes = count * sizeOf(dtype);
  if (in != out) std::memcpy(out, in, bytes);
  auto* data = static_cast<uint8_t*>(out);
  uint8_t* tmp = g.scratch->bytes(bytes);
  reduce::ReduceFn fn = reduce::reduceFn(dtype, op);
  const RdLayout layout = rdLayout(g.size);
  const int r = g.rank;
  const int core = rdCoreRank(r, layout);
  transport::Request send, recv;
  uint32_t step = 0;

  // Fold the ranks beyond the power of two into their odd neighbours.
  if (r < 2 * layout.extra) {
    if (core < 0) {
      g.tx->postSend(send, r + 1, data, bytes, step);
      g.tx->postRecv(recv, r + 1, data, bytes, step + 1);
      g.wait(send);
      g.wait(recv);
      return;
    }
    g.tx->postRecv(recv, r - 1, tmp, bytes, step);
    g.wait(recv);
    fn(data, tmp, data, count);  // lower rank's data first, as every rank orders operands
  }
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
  if (r < 2 * layout.extra) {
    g.tx->postSend(send, r - 1, data, bytes, 1);
    g.wait(send);
  }
}

}  // namespace chorus::algo
