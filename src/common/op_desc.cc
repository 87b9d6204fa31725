#include "common/op_desc.h"

namespace chorus {

std::string_view toString(Collective kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "allreduce";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kBarrier:
      return "barrier";
    case CollectiveKind::kReduce:
      return "reduce";
    case CollectiveKind::kGather:
      return "gather";
    case CollectiveKind::kScatter:
      return "scatter";
    case CollectiveKind::kAllGatherV:
      return "all_gather_v";
    case CollectiveKind::kReduceScatterV:
      return "reduce_scatter_v";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
    case CollectiveKind::kAllToAllV:
      return "all_to_all_v";
    case CollectiveKind::kSendRecv:
      return "send_recv";
  }
  return "?";
}

const char* toString(AlgorithmId algo) {
  switch (algo) {
    case AlgorithmId::kNone:
      return "none";
    case AlgorithmId::kRing:
      return "ring";
    case AlgorithmId::kRecursiveDoubling:
      return "rd";
    case AlgorithmId::kChain:
      return "chain";
    case AlgorithmId::kDissemination:
      return "dissemination";
    case AlgorithmId::kHalvingDoubling:
      return "rhd";
    case AlgorithmId::kHierarchical:
      return "hier";
    case AlgorithmId::kOneShot:
      return "oneshot";
    case AlgorithmId::kTwoShot:
      return "twoshot";
    case AlgorithmId::kDoubleTree:
      return "tree";
    case AlgorithmId::kBinomial:
      return "binomial";
    case AlgorithmId::kScatterAllGather:
      return "scatter_allgather";
    case AlgorithmId::kHalving:
      return "halving";
    case AlgorithmId::kDoubling:
      return "doubling";
    case AlgorithmId::kDirect:
      return "direct";
    case AlgorithmId::kPairwise:
      return "pairwise";
    case AlgorithmId::kRingGather:
      return "ring_gather";
  }
  return "unknown-algorithm";
}

OpDesc OpDesc::ofCounts(CollectiveKind kind, const size_t* counts, int size, DataType dtype,
                        ReduceOp op) {
  uint64_t total = 0;
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a over the counts, in rank order
  for (int r = 0; r < size; ++r) {
    const uint64_t c = counts == nullptr ? 0 : counts[r];
    total += c;
    for (int b = 0; b < 8; ++b) {
      hash ^= (c >> (8 * b)) & 0xff;
      hash *= 0x100000001b3ull;
    }
  }
  const auto folded = static_cast<uint32_t>(hash ^ (hash >> 32)) & 0x7fffffffu;
  return of(kind, total, dtype, op, static_cast<int32_t>(folded));
}

std::string OpDesc::name() const {
  const std::string number = std::to_string(seq / 2);
  if (kind == CollectiveKind::kSendRecv) return "send_recv before #" + number;
  return std::string(toString(kind)) + " #" + number;
}

std::string OpDesc::describe() const {
  std::string s = std::string(toString(kind)) + "(";
  switch (kind) {
    case CollectiveKind::kBarrier:
      break;
    case CollectiveKind::kAllGather:
      s += "count=" + std::to_string(count) + ", " + std::string(chorus::toString(dtype));
      break;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kGather:
    case CollectiveKind::kScatter:
      s += "count=" + std::to_string(count) + ", " + std::string(chorus::toString(dtype)) +
           ", root=" + std::to_string(root);
      break;
    case CollectiveKind::kReduce:
      s += "count=" + std::to_string(count) + ", " + std::string(chorus::toString(dtype)) + ", " +
           std::string(chorus::toString(op)) + ", root=" + std::to_string(root);
      break;
    case CollectiveKind::kAllToAll:
      s += "count=" + std::to_string(count) + ", " + std::string(chorus::toString(dtype));
      break;
    case CollectiveKind::kAllGatherV:
      s += "total=" + std::to_string(count) + ", counts#" + std::to_string(root) + ", " +
           std::string(chorus::toString(dtype));
      break;
    case CollectiveKind::kReduceScatterV:
      s += "total=" + std::to_string(count) + ", counts#" + std::to_string(root) + ", " +
           std::string(chorus::toString(dtype)) + ", " + std::string(chorus::toString(op));
      break;
    case CollectiveKind::kAllToAllV:
    case CollectiveKind::kSendRecv:
      s += std::string(chorus::toString(dtype));
      break;
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kReduceScatter:
      s += "count=" + std::to_string(count) + ", " + std::string(chorus::toString(dtype)) + ", " +
           std::string(chorus::toString(op));
      if (wire != WireFormat::kNative) s += ", wire=" + std::string(chorus::toString(wire));
      break;
  }
  if (kind != CollectiveKind::kBarrier) s += ", ";
  s += std::string(toString(algo)) + ")";
  return s;
}

}  // namespace chorus
