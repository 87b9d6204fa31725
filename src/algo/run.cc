#include "algo/collectives.h"
#include "algo/ring.h"
#include "algo/ring_pattern.h"
#include "reduce/reduce.h"

#include <chorus/error.hpp>

#include <cstring>

namespace chorus::algo {

namespace {
constexpr size_t kSharedHalvingBytes = 4u << 20;
constexpr size_t kSharedDirectBytes = 1u << 20;
}  // namespace

AlgorithmId selectAlgorithm(CollectiveKind kind, size_t bytes, int size, const Options& options,
                            bool layered, bool shared) {
  if (size == 1) return AlgorithmId::kNone;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      if (options.algorithm == "ring") return AlgorithmId::kRing;
      if (options.algorithm == "rd") return AlgorithmId::kRecursiveDoubling;
      if (options.algorithm == "rhd") return AlgorithmId::kHalvingDoubling;
      if (options.algorithm == "oneshot") return AlgorithmId::kOneShot;
      if (options.algorithm == "twoshot") return AlgorithmId::kTwoShot;
      if (options.algorithm == "hier") {
        if (!layered) {
          throw Error(ErrorCode::kInvalidArgument,
                      "CHORUS_ALGO=hier needs ranks on several hosts with several ranks on "
                      "some host (CHORUS_HOST_ID sets the host of a rank)");
        }
        return AlgorithmId::kHierarchical;
      }
      // Across hosts with several ranks each, reducing within each host first (shared memory)
      // sends every byte over the network once per host instead of once per rank.
      if (layered && bytes > options.smallBytes) return AlgorithmId::kHierarchical;
      if (shared && size >= 3) {
        // Measured on one host with 3 and 4 ranks on 2 cores, where every dependent step waits
        // for a peer to be scheduled: fewest rounds win. One round (everyone reduces all
        // inputs) for small buffers; halving-doubling (2 log2 N rounds) on powers of two and the
        // two-round direct exchange otherwise, up to a few MiB; the ring beyond.
        if (bytes <= options.smallBytes && size <= 8) return AlgorithmId::kOneShot;
        if (bytes <= options.smallBytes) return AlgorithmId::kRecursiveDoubling;
        if ((size & (size - 1)) == 0 && bytes <= kSharedHalvingBytes) {
          return AlgorithmId::kHalvingDoubling;
        }
        if (bytes <= kSharedDirectBytes) return AlgorithmId::kTwoShot;
        return AlgorithmId::kRing;
      }
      // Measured on the emulated 1 Gbit/s cluster: recursive doubling wins while latency
      // dominates; halving-doubling's 2 log2 N steps beat the ring's 2(N-1) at mid sizes; the
      // ring's cross-step pipelining wins for large buffers. Folding non-powers of two into
      // halving-doubling costs a whole extra buffer each way, so those keep the ring.
      if (bytes <= options.smallBytes) return AlgorithmId::kRecursiveDoubling;
      if (size >= 4 && (size & (size - 1)) == 0 && bytes <= options.mediumBytes) {
        return AlgorithmId::kHalvingDoubling;
      }
      return AlgorithmId::kRing;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather:
      return AlgorithmId::kRing;
    case CollectiveKind::kBroadcast:
      return AlgorithmId::kChain;
    case CollectiveKind::kBarrier:
      return AlgorithmId::kDissemination;
  }
  return AlgorithmId::kNone;
}

namespace {

void copyIfApart(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
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
    copyIfApart(a.out, in, blockBytes);
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
  copyIfApart(own, a.in, blockBytes);
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
      copyIfApart(out, in, bytes);
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
