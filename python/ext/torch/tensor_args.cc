#include "tensor_args.h"

#include <c10/util/Exception.h>
#include <torch/version.h>

namespace chorus::torch_backend {
namespace {

std::string typeName(const at::Tensor& t) { return std::string(c10::toString(t.scalar_type())); }

const char* opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM:
      return "SUM";
    case c10d::ReduceOp::AVG:
      return "AVG";
    case c10d::ReduceOp::PRODUCT:
      return "PRODUCT";
    case c10d::ReduceOp::MIN:
      return "MIN";
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "UNUSED";
  }
}

std::optional<DataType> reducingType(at::ScalarType s) {
  switch (s) {
    case at::kFloat:
      return DataType::kF32;
    case at::kDouble:
      return DataType::kF64;
    case at::kHalf:
      return DataType::kF16;
    case at::kBFloat16:
      return DataType::kBF16;
    case at::kChar:
      return DataType::kI8;
    case at::kByte:
      return DataType::kU8;
    case at::kInt:
      return DataType::kI32;
    case at::kLong:
      return DataType::kI64;
    default:
      return std::nullopt;
  }
}

bool isFloating(DataType t) {
  return t == DataType::kF32 || t == DataType::kF64 || t == DataType::kF16 || t == DataType::kBF16;
}

}  // namespace

Reduction reductionFor(const at::Tensor& t, const c10d::ReduceOp& rop, const char* name) {
  const auto op = static_cast<c10d::ReduceOp::RedOpType>(rop.op_);
  if (t.scalar_type() == at::kBool) {
    // Logical reductions on bytes that hold 0 or 1: OR is max, AND is min.
    switch (op) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::MAX:
      case c10d::ReduceOp::BOR:
        return {DataType::kU8, ReduceOp::kMax, std::nullopt};
      case c10d::ReduceOp::PRODUCT:
      case c10d::ReduceOp::MIN:
      case c10d::ReduceOp::BAND:
        return {DataType::kU8, ReduceOp::kMin, std::nullopt};
      default:
        TORCH_CHECK_VALUE(false, "chorus backend: ", name, " cannot reduce bool tensors with ",
                          opName(op));
    }
  }
  const auto type = reducingType(t.scalar_type());
  TORCH_CHECK_TYPE(type.has_value(), "chorus backend: ", name, " cannot reduce dtype ", typeName(t),
                   " (it reduces float32, float64, float16, bfloat16, int8, uint8, int32, int64 "
                   "and bool)");
  switch (op) {
    case c10d::ReduceOp::SUM:
      return {*type, ReduceOp::kSum, std::nullopt};
    case c10d::ReduceOp::PRODUCT:
      return {*type, ReduceOp::kProd, std::nullopt};
    case c10d::ReduceOp::MIN:
      return {*type, ReduceOp::kMin, std::nullopt};
    case c10d::ReduceOp::MAX:
      return {*type, ReduceOp::kMax, std::nullopt};
    case c10d::ReduceOp::AVG:
      return {*type, ReduceOp::kAvg, std::nullopt};
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK_TYPE(isFloating(*type), "chorus backend: ", name,
                       " supports PREMUL_SUM on floating-point tensors only, not ", typeName(t));
      const auto* sup = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(rop.supplement_.get());
      TORCH_CHECK_VALUE(sup != nullptr, "chorus backend: ", name, ": PREMUL_SUM without a factor");
      // A factor given as a tensor: one tensor in 2.x, a list (one per input) in 1.13.
#if TORCH_VERSION_MAJOR >= 2
      if (sup->tensor_factor.defined()) {
        return {*type, ReduceOp::kSum, sup->tensor_factor.item<double>()};
      }
#else
      if (!sup->tensor_factors.empty()) {
        return {*type, ReduceOp::kSum, sup->tensor_factors.front().item<double>()};
      }
#endif
      return {*type, ReduceOp::kSum, sup->double_factor};
    }
    default:
      TORCH_CHECK_VALUE(false, "chorus backend: ", name, " does not support ReduceOp ", opName(op),
                        " (bitwise reductions are not implemented; SUM, AVG, "
                        "PRODUCT, MIN, MAX and PREMUL_SUM are)");
  }
}

void checkCpuDense(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), "chorus backend: ", op, " got an undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "chorus backend: ", op, " supports CPU tensors only, got a ",
              t.device().str(), " tensor (use the nccl backend for CUDA tensors)");
  TORCH_CHECK(t.layout() == at::kStrided, "chorus backend: ", op,
              " supports dense tensors only, got layout ", t.layout());
}

void checkSingle(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "chorus backend: ", op,
                    " takes exactly one tensor per process, got ", tensors.size());
  checkCpuDense(tensors[0], op);
}

void checkRank(int64_t rank, int size, const char* op, const char* what) {
  TORCH_CHECK_VALUE(rank >= 0 && rank < size, "chorus backend: ", op, ": invalid ", what, " ", rank,
                    " (the group has ranks 0 to ", size - 1, ")");
}

void checkRoot(int64_t rootRank, int64_t rootTensor, int size, const char* op) {
  checkRank(rootRank, size, op, "root rank");
  TORCH_CHECK_VALUE(rootTensor == 0, "chorus backend: ", op, ": invalid root tensor ", rootTensor);
}

void checkList(const std::vector<at::Tensor>& list, size_t expected, const at::Tensor& like,
               const char* op, const char* what) {
  TORCH_CHECK_VALUE(list.size() == expected, "chorus backend: ", op, ": ", what, " has ",
                    list.size(), " tensors, expected ", expected);
  for (const auto& t : list) {
    checkCpuDense(t, op);
    TORCH_CHECK_TYPE(t.scalar_type() == like.scalar_type(), "chorus backend: ", op, ": ", what,
                     " holds a ", typeName(t), " tensor, expected ", typeName(like));
    TORCH_CHECK_VALUE(t.numel() == like.numel(), "chorus backend: ", op, ": ", what,
                      " holds a tensor of ", t.numel(), " elements, expected ", like.numel());
  }
}

void checkFlatPair(const at::Tensor& large, const at::Tensor& small, int times, const char* op,
                   const char* largeName) {
  checkCpuDense(large, op);
  checkCpuDense(small, op);
  TORCH_CHECK_TYPE(large.scalar_type() == small.scalar_type(), "chorus backend: ", op,
                   ": the tensors' dtypes differ (", typeName(large), " and ", typeName(small),
                   ")");
  TORCH_CHECK_VALUE(large.numel() == small.numel() * times, "chorus backend: ", op, ": the ",
                    largeName, " holds ", large.numel(), " elements, expected world size x ",
                    small.numel(), " = ", small.numel() * times);
}

size_t byteCount(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

}  // namespace chorus::torch_backend
