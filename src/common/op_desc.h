// What a collective call is, as every rank must agree on it. Carried in every frame so that
// ranks which called different collectives detect it instead of exchanging wrong data.
#pragma once

#include <chorus/types.hpp>

#include <cstdint>
#include <string>

namespace chorus {

enum class CollectiveKind : uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kBarrier
};
// Values travel in frames: append new ones, never renumber.
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
  kDoubling           // all-gather
};

const char* toString(CollectiveKind kind);
const char* toString(AlgorithmId algo);

struct OpDesc {
  uint64_t seq = 0;  // operation sequence number on this communicator, from 0
  CollectiveKind kind = CollectiveKind::kBarrier;
  DataType dtype = DataType::kU8;
  ReduceOp op = ReduceOp::kSum;
  AlgorithmId algo = AlgorithmId::kNone;
  int32_t root = 0;
  uint64_t count = 0;  // elements, in the meaning of the collective's count argument

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
  // Same call on both sides (sequence number included).
  bool sameCall(const OpDesc& o) const {
    return seq == o.seq && kind == o.kind && dtype == o.dtype && op == o.op && algo == o.algo &&
           root == o.root && count == o.count;
  }
  // "allreduce(count=100, f32, sum, ring)".
  std::string describe() const;
  // "allreduce #12".
  std::string name() const;
};

}  // namespace chorus
