// What a collective call is, as every rank must agree on it. Carried in every frame so that
// ranks which called different collectives detect it instead of exchanging wrong data.
#pragma once

#include <chorus/options.hpp>
#include <chorus/types.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace chorus {

// The collective in a frame is the public Collective (one type, so no conversion): frames carry
// it as one byte, so its values are appended to, never renumbered. The name says what the code
// means here: the kind of a call.
using CollectiveKind = Collective;
// The last value of each enum, for range checks of decoded frames.
inline constexpr CollectiveKind kLastCollectiveKind = Collective::kSendRecv;
static_assert(kNumCollectives == static_cast<size_t>(kLastCollectiveKind) + 1);
// Values travel in frames: append new ones, never renumber. Not the public Algorithm, which has
// kAuto and the user's order: algo::toAlgorithmId (algo/select.h) is the one conversion.
enum class AlgorithmId : uint8_t {
  kNone,
  kRing,
  kRecursiveDoubling,
  kChain,
  kDissemination,
  kHalvingDoubling,
  kHierarchical,
  kOneShot,
  kTwoShot,
  kDoubleTree,
  kBinomial,          // broadcast
  kScatterAllGather,  // broadcast
  kHalving,           // reduce-scatter
  kDoubling,          // all-gather
  kDirect,            // gather, scatter: the root talks to every rank
  kPairwise,          // all-to-all(v): rank r sends to r + s and receives from r - s
  kRingGather         // reduce: ring reduce-scatter, then every block to the root
};
inline constexpr AlgorithmId kLastAlgorithmId = AlgorithmId::kRingGather;

const char* toString(AlgorithmId algo);

struct OpDesc {
  // Position in this communicator's order of calls. Collective j (from 0) has seq 2j + 1; sends
  // and receives issued after collective j - 1 and before collective j have seq 2j: the two ranks
  // of a pair agree on it, and the ranks not involved, which never see those frames, stay in
  // step. name() shows j.
  uint64_t seq = 0;
  CollectiveKind kind = CollectiveKind::kBarrier;
  DataType dtype = DataType::kU8;
  ReduceOp op = ReduceOp::kSum;
  AlgorithmId algo = AlgorithmId::kNone;
  int32_t root = 0;
  uint64_t count = 0;  // elements, in the meaning of the collective's count argument
  WireFormat wire = WireFormat::kNative;  // how an f32 all-reduce travels (CallOptions)

  // A call as the user makes it; the communicator fills in seq and algo when it issues it.
  static OpDesc of(CollectiveKind kind, uint64_t count, DataType dtype, ReduceOp op,
                   int32_t root = 0) {
    OpDesc d;
    d.kind = kind;
    d.count = count;
    d.dtype = dtype;
    d.op = op;
    d.root = root;
    return d;
  }
  // A call with per-rank counts (all-gather-v, reduce-scatter-v): count is their total and root a
  // 31-bit fingerprint of the whole list, so ranks that pass different lists see a mismatch.
  static OpDesc ofCounts(CollectiveKind kind, const size_t* counts, int size, DataType dtype,
                         ReduceOp op);
  // Same call on both sides (sequence number included).
  bool sameCall(const OpDesc& o) const {
    return seq == o.seq && kind == o.kind && dtype == o.dtype && op == o.op && algo == o.algo &&
           root == o.root && count == o.count && wire == o.wire;
  }
  // "allreduce(count=100, f32, sum, ring)"; "allreduce(count=100, f32, sum, wire=bf16, ring)".
  std::string describe() const;
  // "allreduce #12"; "send_recv before #12".
  std::string name() const;
  // The seq of collective j, and of the sends and receives just before it.
  static constexpr uint64_t collectiveSeq(uint64_t j) { return 2 * j + 1; }
  static constexpr uint64_t pointToPointSeq(uint64_t j) { return 2 * j; }
};

}  // namespace chorus
