#include "algo/collectives.h"
#include "algo/copy.h"
#include "algo/ring.h"
#include "algo/ring_pattern.h"
#include "reduce/reduce.h"

#include <chorus/error.hpp>

#include <cstring>

namespace chorus::algo {

namespace {

void copyIfApart(DataType dtype, void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) moveBytes(dtype, dst, src, bytes);
}

void allReduce(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  allReduceWith(g, d.algo, a.in, a.out, d.count, d.dtype, d.op);
}

void reduceScatter(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  const size_t blockBytes = d.count * sizeOf(d.dtype);
  const auto* in = static_cast<const uint8_t*>(a.in);
  if (d.algo == AlgorithmId::kNone) {
    copyIfApart(d.dtype, a.out, in, blockBytes);
    return;
  }
  RingSpec s;
  s.in = in;
  // Partial sums of the other blocks go to scratch: the user's output holds one block only.
  s.acc = g.scratch->bytes(blockBytes * static_cast<size_t>(g.size));
  s.own = static_cast<uint8_t*>(a.out);
  s.blockCount = d.count;
  s.totalCount = d.count * static_cast<size_t>(g.size);
  s.dtype = d.dtype;
  s.op = d.op;
  s.gather = false;
  ringRun(g, s);
}

void allGather(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  const size_t blockBytes = d.count * sizeOf(d.dtype);
  auto* out = static_cast<uint8_t*>(a.out);
  uint8_t* own = out + blockBytes * static_cast<size_t>(g.rank);
  copyIfApart(d.dtype, own, a.in, blockBytes);
  if (d.algo == AlgorithmId::kNone) return;
  RingSpec s;
  s.acc = out;
  s.own = own;
  s.blockCount = d.count;
  s.totalCount = d.count * static_cast<size_t>(g.size);
  s.dtype = d.dtype;
  s.reduce = false;
  ringRun(g, s);
}

}  // namespace

void allReduceWith(const Group& g, AlgorithmId algo, const void* in, void* out, size_t count,
                   DataType dtype, ReduceOp op) {
  const size_t bytes = count * sizeOf(dtype);
  switch (algo) {
    case AlgorithmId::kNone:  // a group of one; avg over one rank is the identity
      copyIfApart(dtype, out, in, bytes);
      return;
    case AlgorithmId::kRecursiveDoubling:
      return recursiveDoublingAllReduce(g, in, out, count, dtype, op);
    case AlgorithmId::kHalvingDoubling:
      return halvingDoublingAllReduce(g, in, out, count, dtype, op);
    case AlgorithmId::kHierarchical:
      return hierarchicalAllReduce(g, in, out, count, dtype, op);
    case AlgorithmId::kOneShot:
      return oneShotAllReduce(g, in, out, count, dtype, op);
    case AlgorithmId::kTwoShot:
      return twoShotAllReduce(g, in, out, count, dtype, op);
    case AlgorithmId::kDoubleTree:
      return doubleTreeAllReduce(g, in, out, count, dtype, op);
    default:
      break;
  }
  RingSpec s;
  s.in = static_cast<const uint8_t*>(in);
  s.acc = static_cast<uint8_t*>(out);
  s.own = s.acc + balancedBlock(count, g.size, g.rank).offset * sizeOf(dtype);
  s.totalCount = count;
  s.dtype = dtype;
  s.op = op;
  ringRun(g, s);
}

void run(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  if (d.kind == CollectiveKind::kBarrier) {
    if (g.size > 1) disseminationBarrier(g);
    return;
  }
  if (d.count == 0) return;
  switch (d.kind) {
    case CollectiveKind::kAllReduce:
      return allReduce(g, a);
    case CollectiveKind::kReduceScatter:
      return reduceScatter(g, a);
    case CollectiveKind::kAllGather:
      return allGather(g, a);
    case CollectiveKind::kBroadcast:
      if (g.size > 1) chainBroadcast(g, a.out, d.count * sizeOf(d.dtype), d.root);
      return;
    case CollectiveKind::kBarrier:
      return;
  }
  throw Error(ErrorCode::kInternal, "unknown collective");
}

}  // namespace chorus::algo
