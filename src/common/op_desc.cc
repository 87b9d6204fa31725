#include "common/op_desc.h"

namespace chorus {

const char* toString(CollectiveKind kind) {
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
  }
  return "unknown-collective";
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
  }
  return "unknown-algorithm";
}

std::string OpDesc::name() const {
  return std::string(toString(kind)) + " #" + std::to_string(seq);
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
      s += "count=" + std::to_string(count) + ", " + std::string(chorus::toString(dtype)) +
           ", root=" + std::to_string(root);
      break;
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kReduceScatter:
      s += "count=" + std::to_string(count) + ", " + std::string(chorus::toString(dtype)) + ", " +
           std::string(chorus::toString(op));
      break;
  }
  if (kind != CollectiveKind::kBarrier) s += ", ";
  s += std::string(toString(algo)) + ")";
  return s;
}

}  // namespace chorus
