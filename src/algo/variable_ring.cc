// All-gather-v and reduce-scatter-v: the ring of ring.cc with blocks of the sizes the caller
// gives (zero included), one message per block and step, no segments. Every rank receives from
// its left neighbour and sends to its right one, so a rank whose call differs from its
// neighbour's is noticed by both. Blocks of size zero still travel as empty messages, which keeps
// the steps of every rank in line and lets the frames be checked.
//   all-gather-v: in step s (0..N-2) rank r forwards block r - s, which it received in step
//   s - 1 (its own in step 0), and receives block r - s - 1 straight into the output.
//   reduce-scatter-v: in step s rank r receives the partial result of block r - s - 2 into
//   scratch, adds its own input to it and sends it on in step s + 1 (step 0 sends its input of
//   block r - 1); the last block to arrive is r, which is reduced into the output.
#include "algo/collectives.h"
#include "algo/ring_pattern.h"
#include "reduce/internal_types.h"
#include "reduce/reduce.h"

#include <vector>

namespace chorus::algo {
namespace {

// Offsets of the blocks in elements (prefix sums of counts), in memory reused from call to call.
const std::vector<size_t>& offsetsOf(const Group& g, const size_t* counts, int n) {
  std::vector<size_t>& offsets = g.scratch->sizes(static_cast<size_t>(n) + 1);
  offsets[0] = 0;
  for (int q = 0; q < n; ++q) {
    offsets[static_cast<size_t>(q) + 1] = offsets[static_cast<size_t>(q)] + counts[q];
  }
  return offsets;
}

}  // namespace

void ringAllGatherV(const Group& g, void* out, const size_t* counts, DataType dtype) {
  const int n = g.size, r = g.rank;
  const size_t es = reduce::elementSize(dtype);
  const std::vector<size_t>& off = offsetsOf(g, counts, n);
  auto* base = static_cast<uint8_t*>(out);
  auto at = [&](int b) { return base + off[static_cast<size_t>(b)] * es; };
  auto bytesOf = [&](int b) { return counts[b] * es; };
  const int left = ringMod(r - 1, n), right = ringMod(r + 1, n);
  const size_t steps = static_cast<size_t>(n - 1);
  auto& recvs = g.scratch->recvs(steps);
  auto& sends = g.scratch->sends(steps);
  for (size_t s = 0; s < steps; ++s) {
    const int b = ringMod(r - static_cast<int>(s) - 1, n);
    g.tx->postRecv(recvs[s], left, at(b), bytesOf(b), static_cast<uint32_t>(s));
  }
  for (size_t s = 0; s < steps; ++s) {
    if (s > 0) g.wait(recvs[s - 1]);
    const int b = ringMod(r - static_cast<int>(s), n);
    g.tx->postSend(sends[s], right, at(b), bytesOf(b), static_cast<uint32_t>(s));
  }
  for (auto& q : recvs) g.wait(q);
  for (auto& q : sends) g.wait(q);
}

void ringReduceScatterV(const Group& g, const void* in, void* out, const size_t* counts,
                        DataType dtype, ReduceOp op) {
  const int n = g.size, r = g.rank;
  const size_t es = reduce::elementSize(dtype);
  const std::vector<size_t>& off = offsetsOf(g, counts, n);
  const auto* src = static_cast<const uint8_t*>(in);
  // Block b's partial result lands at its own offset: each block but r - 1 arrives once.
  uint8_t* slots = g.scratch->bytes(off[static_cast<size_t>(n)] * es);
  auto slot = [&](int b) { return slots + off[static_cast<size_t>(b)] * es; };
  auto input = [&](int b) { return src + off[static_cast<size_t>(b)] * es; };
  const int left = ringMod(r - 1, n), right = ringMod(r + 1, n);
  const size_t steps = static_cast<size_t>(n - 1);
  auto& recvs = g.scratch->recvs(steps);
  auto& sends = g.scratch->sends(steps);
  for (size_t s = 0; s < steps; ++s) {
    const int b = ringMod(r - static_cast<int>(s) - 2, n);
    g.tx->postRecv(recvs[s], left, slot(b), counts[b] * es, static_cast<uint32_t>(s));
  }
  const reduce::ReduceFn fn = reduce::reduceFn(dtype, op);
  for (size_t s = 0; s < steps; ++s) {
    const int b = ringMod(r - static_cast<int>(s) - 1, n);
    const uint8_t* what = input(b);
    if (s > 0) {
      g.wait(recvs[s - 1]);
      fn(slot(b), slot(b), input(b), counts[b]);
      what = slot(b);
    }
    g.tx->postSend(sends[s], right, what, counts[b] * es, static_cast<uint32_t>(s));
  }
  g.wait(recvs[steps - 1]);
  // In place, out is input(r): no send reads it.
  fn(out, slot(r), input(r), counts[r]);
  if (op == ReduceOp::kAvg) reduce::divide(out, counts[r], dtype, n);
  for (auto& q : sends) g.wait(q);
}

}  // namespace chorus::algo
