// One collective on one group: algo::run reads the call's fingerprint (OpDesc: kind, count,
// type, op, root, and the algorithm that select.cc chose for it, the same on every rank) and
// hands it to that algorithm, blocking on the calling thread until this rank's part is done. The
// library's worker calls it once the call is validated (core/validate.cc) and the group's
// transport, scratch and subgroups are set up; the simulator calls it over a virtual transport.
//
// Why a file of its own: the algorithm files each compute one thing on plain buffers, and the
// collectives differ in what their buffers mean (an all-gather's input is one block of the
// output, a reduce-scatter's output one block of the input). This file holds that translation
// and the cases that need no algorithm (a group of one, a count of zero, the copy into place
// when a collective does not run in place), and sets up the ring through RingSpec's named
// constructors, one per collective.
#include "algo/collectives.h"
#include "algo/copy.h"
#include "algo/in_place.h"
#include "algo/ring.h"
#include "algo/ring_pattern.h"
#include "reduce/internal_types.h"
#include "reduce/reduce.h"

#include <chorus/error.hpp>

#include <cstring>
#include <string>
#include <vector>

namespace chorus::algo {

namespace {

void copyIfApart(DataType dtype, void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) moveBytes(dtype, dst, src, bytes);
}

[[noreturn]] void unsupported(const OpDesc& d) {
  throw Error(ErrorCode::kInternal,
              std::string(toString(d.kind)) + " has no algorithm '" + toString(d.algo) + "'");
}

void broadcast(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  if (g.size <= 1) return;
  const size_t bytes = d.count * reduce::elementSize(d.dtype);
  switch (d.algo) {
    case AlgorithmId::kChain:
      return chainBroadcast(g, a.out, bytes, d.root);
    case AlgorithmId::kBinomial:
      return binomialBroadcast(g, a.out, bytes, d.root);
    case AlgorithmId::kScatterAllGather:
      return scatterAllGatherBroadcast(g, a.out, d.count, d.dtype, d.root);
    default:
      unsupported(d);
  }
}

void allReduce(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  allReduceWith(g, d.algo, a.in, a.out, d.count, d.dtype, d.op, d.wire);
}

void reduceScatter(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  const size_t blockBytes = d.count * reduce::elementSize(d.dtype);
  const auto* in = static_cast<const uint8_t*>(a.in);
  if (d.algo == AlgorithmId::kNone) {
    copyIfApart(d.dtype, a.out, in, blockBytes);
    return;
  }
  if (d.algo == AlgorithmId::kHalving) {
    return halvingReduceScatter(g, in, a.out, d.count, d.dtype, d.op);
  }
  if (d.algo != AlgorithmId::kRing) unsupported(d);
  // Partial sums of the other blocks go to scratch: the user's output holds one block only.
  uint8_t* partials = g.scratch->bytes(blockBytes * static_cast<size_t>(g.size));
  ringRun(g, RingSpec::reduceScatterBlocks(g, in, partials, a.out, d.count, d.dtype, d.op));
}

void allGather(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  const size_t blockBytes = d.count * reduce::elementSize(d.dtype);
  auto* out = static_cast<uint8_t*>(a.out);
  uint8_t* own = out + blockBytes * static_cast<size_t>(g.rank);
  copyIfApart(d.dtype, own, a.in, blockBytes);
  if (d.algo == AlgorithmId::kNone) return;
  if (d.algo == AlgorithmId::kDoubling) return doublingAllGather(g, out, d.count, d.dtype);
  if (d.algo != AlgorithmId::kRing) unsupported(d);
  ringRun(g, RingSpec::allGatherBlocks(g, out, d.count, d.dtype));
}

// The collectives of collectives.h's second half: reduce, gather, scatter, the v-variants and
// all-to-all. A group of one (kNone) only copies its own block.
void reduceToRoot(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  if (d.algo == AlgorithmId::kNone)
    return copyIfApart(d.dtype, a.out, a.in, d.count * reduce::elementSize(d.dtype));
  if (d.algo == AlgorithmId::kRingGather) {
    return ringGatherReduce(g, a.in, a.out, d.count, d.dtype, d.op, d.root);
  }
  if (d.algo != AlgorithmId::kBinomial) unsupported(d);
  binomialReduce(g, a.in, a.out, d.count, d.dtype, d.op, d.root);
}

void gather(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  const size_t bytes = d.count * reduce::elementSize(d.dtype);
  if (d.algo == AlgorithmId::kNone) return copyIfApart(d.dtype, a.out, a.in, bytes);
  if (d.algo != AlgorithmId::kDirect) unsupported(d);
  directGather(g, a.in, a.out, bytes, d.dtype, d.root);
}

void scatter(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  const size_t bytes = d.count * reduce::elementSize(d.dtype);
  if (d.algo == AlgorithmId::kNone) return copyIfApart(d.dtype, a.out, a.in, bytes);
  if (d.algo != AlgorithmId::kDirect) unsupported(d);
  directScatter(g, a.in, a.out, bytes, d.dtype, d.root);
}

size_t elementsBefore(const std::vector<size_t>& counts, int rank) {
  size_t at = 0;
  for (int q = 0; q < rank; ++q) at += counts[static_cast<size_t>(q)];
  return at;
}

void allGatherV(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  const size_t es = reduce::elementSize(d.dtype);
  uint8_t* own = static_cast<uint8_t*>(a.out) + elementsBefore(a.counts, g.rank) * es;
  copyIfApart(d.dtype, own, a.in, a.counts[static_cast<size_t>(g.rank)] * es);
  if (d.algo == AlgorithmId::kNone) return;
  if (d.algo != AlgorithmId::kRing) unsupported(d);
  ringAllGatherV(g, a.out, a.counts.data(), d.dtype);
}

void reduceScatterV(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  const size_t es = reduce::elementSize(d.dtype);
  if (d.algo == AlgorithmId::kNone) {
    // avg over one rank is the identity.
    return copyIfApart(d.dtype, a.out, a.in, a.counts[0] * es);
  }
  if (d.algo != AlgorithmId::kRing) unsupported(d);
  ringReduceScatterV(g, a.in, a.out, a.counts.data(), d.dtype, d.op);
}

void allToAll(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  const size_t bytes = d.count * reduce::elementSize(d.dtype);
  if (d.algo == AlgorithmId::kNone) return copyIfApart(d.dtype, a.out, a.in, bytes);
  if (d.algo != AlgorithmId::kPairwise) unsupported(d);
  pairwiseAllToAll(g, a.in, a.out, bytes, d.dtype);
}

void allToAllV(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  if (d.algo == AlgorithmId::kNone) {
    return copyIfApart(d.dtype, a.out, a.in, a.counts[0] * reduce::elementSize(d.dtype));
  }
  if (d.algo != AlgorithmId::kPairwise) unsupported(d);
  pairwiseAllToAllV(g, a.in, a.counts.data(), a.out, a.recvCounts.data(), d.dtype);
}

// One message to or from a.peer, empty ones included (the receiver checks the size).
void pointToPoint(const Group& g, const Args& a) {
  transport::Request r;
  if (a.sending) {
    g.tx->postSend(r, a.peer, a.in, a.bytes, 0);
  } else {
    g.tx->postRecv(r, a.peer, a.out, a.bytes, 0);
  }
  g.wait(r);
}

}  // namespace

void allReduceWith(const Group& g, AlgorithmId algo, const void* in, void* out, size_t count,
                   DataType dtype, ReduceOp op, WireFormat wire) {
  const size_t bytes = count * reduce::elementSize(dtype);
  if (g.size == 1) algo = AlgorithmId::kNone;  // whatever was asked: nothing to exchange
  // Only the ring carries a wire format (select.cc falls back to it and says so).
  if (wire != WireFormat::kNative && algo != AlgorithmId::kNone && algo != AlgorithmId::kRing) {
    throw Error(ErrorCode::kInternal, std::string("allreduce: '") + toString(algo) +
                                          "' cannot carry wire format " +
                                          std::string(chorus::toString(wire)));
  }
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
    case AlgorithmId::kRing:
      if (ringRunsBothWays(bytes, g.size, g.ringBidirectionalBytes)) {
        return bidirectionalRingAllReduce(g, in, out, count, dtype, op, wire);
      }
      break;
    default:
      throw Error(ErrorCode::kInternal,
                  std::string("allreduce has no algorithm '") + toString(algo) + "'");
  }
  ringRun(g, RingSpec::allReduce(g, in, out, count, dtype, op, RingDirection::kForward, wire));
}

void run(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  if (d.kind == CollectiveKind::kBarrier) {
    if (g.size > 1) disseminationBarrier(g);
    return;
  }
  // Per-pair counts are this rank's own: nobody may skip the exchange on a count of its own.
  if (d.kind == CollectiveKind::kAllToAllV) return allToAllV(g, a);
  if (d.kind == CollectiveKind::kSendRecv) return pointToPoint(g, a);
  if (d.count == 0) return;
  if (runInPlace(g, a)) return;  // registered buffers on one host (algo/in_place.h)
  switch (d.kind) {
    case CollectiveKind::kAllReduce:
      return allReduce(g, a);
    case CollectiveKind::kReduceScatter:
      return reduceScatter(g, a);
    case CollectiveKind::kAllGather:
      return allGather(g, a);
    case CollectiveKind::kBroadcast:
      return broadcast(g, a);
    case CollectiveKind::kBarrier:
      return;
    case CollectiveKind::kReduce:
      return reduceToRoot(g, a);
    case CollectiveKind::kGather:
      return gather(g, a);
    case CollectiveKind::kScatter:
      return scatter(g, a);
    case CollectiveKind::kAllGatherV:
      return allGatherV(g, a);
    case CollectiveKind::kReduceScatterV:
      return reduceScatterV(g, a);
    case CollectiveKind::kAllToAll:
      return allToAll(g, a);
    case CollectiveKind::kAllToAllV:
      return allToAllV(g, a);
    case CollectiveKind::kSendRecv:
      return pointToPoint(g, a);
  }
  throw Error(ErrorCode::kInternal, "unknown collective");
}

}  // namespace chorus::algo
