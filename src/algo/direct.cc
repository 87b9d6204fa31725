// All-reduce by direct exchange, for groups whose ranks share a host (shared memory) and small to
// medium buffers: no chain of dependent steps, which matters most when ranks outnumber cores and
// every dependent step waits for a peer to be scheduled.
//   one-shot: every rank sends its whole buffer to every other rank and reduces all N inputs in
//   rank order (1 round; identical bits everywhere because every rank computes the same thing);
//   two-shot: block q of every input goes to rank q, which reduces it in rank order, then every
//   rank sends its reduced block to all (2 rounds, (N-1)/N of the buffer each way).
#include "algo/collectives.h"
#include "algo/copy.h"
#include "algo/ring_pattern.h"
#include "reduce/internal_types.h"
#include "reduce/reduce.h"

namespace chorus::algo {
namespace {

// Waits for every posted request.
void waitAll(const Group& g, std::vector<transport::Request>& rs) {
  for (auto& r : rs) g.wait(r);
}

}  // namespace

void oneShotAllReduce(const Group& g, const void* in, void* out, size_t count, DataType dtype,
                      ReduceOp op) {
  const int n = g.size;
  const size_t bytes = count * reduce::elementSize(dtype);
  uint8_t* inputs = g.scratch->bytes(bytes * static_cast<size_t>(n));  // slot q: rank q's input
  auto& sends = g.scratch->sends(static_cast<size_t>(n));
  auto& recvs = g.scratch->recvs(static_cast<size_t>(n));
  auto slot = [&](int q) { return inputs + bytes * static_cast<size_t>(q); };
  copyBytes(dtype, slot(g.rank), in, bytes);
  for (int q = 0; q < n; ++q) {
    if (q != g.rank) g.tx->postRecv(recvs[static_cast<size_t>(q)], q, slot(q), bytes, 0);
  }
  for (int q = 0; q < n; ++q) {
    if (q != g.rank) g.tx->postSend(sends[static_cast<size_t>(q)], q, slot(g.rank), bytes, 0);
  }
  waitAll(g, recvs);
  reduce::ReduceFn fn = reduce::reduceFn(dtype, op);
  fn(out, slot(0), slot(1), count);
  for (int q = 2; q < n; ++q) fn(out, out, slot(q), count);
  if (op == ReduceOp::kAvg) reduce::divide(out, count, dtype, n);
  waitAll(g, sends);
}

void twoShotAllReduce(const Group& g, const void* in, void* out, size_t count, DataType dtype,
                      ReduceOp op) {
  const int n = g.size, r = g.rank;
  const size_t es = reduce::elementSize(dtype);
  const Block mine = balancedBlock(count, n, r);
  const size_t blockBytes = balancedBlock(count, n, 0).count * es;  // the largest block
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  // Slot q: rank q's contribution to this rank's block.
  uint8_t* parts = g.scratch->bytes(blockBytes * static_cast<size_t>(n));
  auto& sends = g.scratch->sends(2 * static_cast<size_t>(n));
  auto& recvs = g.scratch->recvs(2 * static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    if (q == r) continue;
    g.tx->postRecv(recvs[static_cast<size_t>(q)], q, parts + blockBytes * static_cast<size_t>(q),
                   mine.count * es, 0);
  }
  for (int q = 0; q < n; ++q) {
    if (q == r) continue;
    Block b = balancedBlock(count, n, q);
    g.tx->postSend(sends[static_cast<size_t>(q)], q, src + b.offset * es, b.count * es, 0);
  }
  // Gathered blocks land in place; posted now so that early finishers' blocks are taken at once.
  for (int q = 0; q < n; ++q) {
    if (q == r) continue;
    Block b = balancedBlock(count, n, q);
    g.tx->postRecv(recvs[static_cast<size_t>(n + q)], q, dst + b.offset * es, b.count * es, 1);
  }
  copyBytes(dtype, parts + blockBytes * static_cast<size_t>(r), src + mine.offset * es,
            mine.count * es);
  for (int q = 0; q < n; ++q) {
    if (q != r) g.wait(recvs[static_cast<size_t>(q)]);
  }
  reduce::ReduceFn fn = reduce::reduceFn(dtype, op);
  uint8_t* result = dst + mine.offset * es;
  // Sends of this rank's input may still read the region the result goes to (in place).
  for (int q = 0; q < n; ++q) {
    if (q != r) g.wait(sends[static_cast<size_t>(q)]);
  }
  fn(result, parts, parts + blockBytes, mine.count);
  for (int q = 2; q < n; ++q)
    fn(result, result, parts + blockBytes * static_cast<size_t>(q), mine.count);
  if (op == ReduceOp::kAvg) reduce::divide(result, mine.count, dtype, n);
  for (int q = 0; q < n; ++q) {
    if (q != r) g.tx->postSend(sends[static_cast<size_t>(n + q)], q, result, mine.count * es, 1);
  }
  for (int q = 0; q < n; ++q) {
    if (q != r) g.wait(recvs[static_cast<size_t>(n + q)]);
  }
  for (int q = 0; q < n; ++q) {
    if (q != r) g.wait(sends[static_cast<size_t>(n + q)]);
  }
}

}  // namespace chorus::algo
