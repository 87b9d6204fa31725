// How recursive doubling and halving-doubling run over a group whose size is not a power of two:
// the even rank of each of the first `extra` pairs hands its buffer to its odd neighbour, sits
// out, and receives the result at the end (message steps 0 and 1 on that pair's link).
#pragma once

#include "algo/group.h"
#include "algo/ring_pattern.h"
#include "reduce/internal_types.h"
#include "reduce/reduce.h"

namespace chorus::algo {

enum class FoldRole { kCore, kAbsorbed, kSatOut };

// kSatOut: this rank's result is already in `out`, nothing else to do. kAbsorbed: `out` holds the
// neighbour's data combined with `in` (lower rank first). kCore: nothing happened.
inline FoldRole foldIn(const Group& g, const RdLayout& l, const void* in, void* out, size_t count,
                       DataType dtype, reduce::ReduceFn fn, transport::Request& send,
                       transport::Request& recv) {
  const int r = g.rank;
  if (r >= 2 * l.extra) return FoldRole::kCore;
  const size_t bytes = count * reduce::elementSize(dtype);
  if (rdCoreRank(r, l) < 0) {
    g.tx->postSend(send, r + 1, in, bytes, 0);
    g.tx->postRecv(recv, r + 1, out, bytes, 1);
    g.wait(send);
    g.wait(recv);
    return FoldRole::kSatOut;
  }
  uint8_t* tmp = g.scratch->bytes(bytes);
  g.tx->postRecv(recv, r - 1, tmp, bytes, 0);
  g.wait(recv);
  fn(out, tmp, in, count);
  return FoldRole::kAbsorbed;
}

// On an absorbing rank: hands the final result back to the neighbour that sat out.
inline void foldOut(const Group& g, const RdLayout& l, const void* out, size_t bytes,
                    transport::Request& send) {
  if (g.rank >= 2 * l.extra) return;
  g.tx->postSend(send, g.rank - 1, out, bytes, 1);
  g.wait(send);
}

}  // namespace chorus::algo
