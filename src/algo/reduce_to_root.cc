// Reduce to a root. Small buffers: over a binomial tree (algo/binomial_pattern.h), the broadcast's
// tree run backwards: each rank receives its children's partial results, smallest subtree first
// (they are ready first), combines them with its own input and sends the result to its parent.
// ceil(log2 N) levels; the root divides an average once, at the end. Only the root's output is
// written; the others combine in scratch memory (or send their input as it is, for a leaf).
// Large buffers (ring_gather): every rank reduces one balanced block round the ring
// (variable_ring.cc), then sends it to the root; each element is reduced once, every link
// carries about 2 (N-1)/N of the buffer instead of the tree's ceil(log2 N) whole buffers.
#include "algo/binomial_pattern.h"
#include "algo/collectives.h"
#include "algo/neighbour_token.h"
#include "algo/ring_pattern.h"
#include "reduce/internal_types.h"
#include "reduce/reduce.h"

#include <vector>

namespace chorus::algo {

void binomialReduce(const Group& g, const void* in, void* out, size_t count, DataType dtype,
                    ReduceOp op, int root) {
  const int n = g.size;
  const int rel = rootRelative(g.rank, root, n);
  const size_t bytes = count * reduce::elementSize(dtype);

  int children[32];
  int childCount = 0;
  for (int m = 1; m < binomialMask(rel, n); m *= 2) {
    if (rel + m < n) children[childCount++] = fromRootRelative(rel + m, root, n);
  }
  uint8_t* slots = g.scratch->bytes(bytes * static_cast<size_t>(childCount));
  auto slot = [&](int c) { return slots + bytes * static_cast<size_t>(c); };
  auto& recvs = g.scratch->recvs(static_cast<size_t>(childCount));

  NeighbourToken token;
  token.start(g);
  for (int c = 0; c < childCount; ++c) {
    g.tx->postRecv(recvs[static_cast<size_t>(c)], children[c], slot(c), bytes, 0);
  }
  // The root combines straight into its output (in place: in == out); an inner rank into scratch.
  uint8_t* acc =
      rel == 0 ? static_cast<uint8_t*>(out) : (childCount > 0 ? g.scratch->second(bytes) : nullptr);
  const reduce::ReduceFn fn = reduce::reduceFn(dtype, op);
  for (int c = 0; c < childCount; ++c) {
    g.wait(recvs[static_cast<size_t>(c)]);
    fn(acc, c == 0 ? in : acc, slot(c), count);
  }
  if (rel == 0) {
    if (op == ReduceOp::kAvg) reduce::divide(out, count, dtype, n);
  } else {
    transport::Request up;
    const int parent = fromRootRelative(binomialParent(rel), root, n);
    g.tx->postSend(up, parent, childCount > 0 ? acc : in, bytes, 0);
    g.wait(up);
  }
  token.finish(g);
}

void ringGatherReduce(const Group& g, const void* in, void* out, size_t count, DataType dtype,
                      ReduceOp op, int root) {
  const int n = g.size;
  const size_t es = reduce::elementSize(dtype);
  std::vector<size_t>& counts = g.scratch->sizes2(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) counts[static_cast<size_t>(q)] = balancedBlock(count, n, q).count;
  auto at = [&](int q) { return balancedBlock(count, n, q).offset * es; };
  const size_t mine = counts[static_cast<size_t>(g.rank)] * es;
  // The root's block lands in place in its output; the others' in scratch (the ring's own
  // scratch is g.scratch->bytes).
  uint8_t* block = g.rank == root ? static_cast<uint8_t*>(out) + at(root) : g.scratch->second(mine);
  ringReduceScatterV(g, in, block, counts.data(), dtype, op);  // averages divided per block
  if (g.rank != root) {
    transport::Request up;
    g.tx->postSend(up, root, block, mine, static_cast<uint32_t>(n));
    g.wait(up);
    return;
  }
  auto& recvs = g.scratch->recvs(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    if (q == root) continue;
    g.tx->postRecv(recvs[static_cast<size_t>(q)], q, static_cast<uint8_t*>(out) + at(q),
                   counts[static_cast<size_t>(q)] * es, static_cast<uint32_t>(n));
  }
  for (auto& r : recvs) g.wait(r);
}

}  // namespace chorus::algo
