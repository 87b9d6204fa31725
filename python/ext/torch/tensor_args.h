// Translation of torch's arguments into Chorus's: dtypes, reduce ops, and the checks that make a
// misuse fail at once on the calling rank with torch's usual exception types.
#pragma once

#include <chorus/types.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <optional>
#include <string>
#include <vector>

namespace chorus::torch_backend {

// How a reduction runs on Chorus: the dtype and op it uses, and a factor to multiply the input by
// first (PREMUL_SUM).
struct Reduction {
  DataType type;
  ReduceOp op;
  std::optional<double> premul;
};

// The dtype and op for a reduction; throws (TypeError / ValueError) for a pair Chorus cannot
// reduce, naming both.
Reduction reductionFor(const at::Tensor& t, const c10d::ReduceOp& op, const char* opName);

// A dense CPU tensor, or a clear error naming the backend (CUDA, sparse, other devices).
void checkCpuDense(const at::Tensor& t, const char* op);
// Exactly one tensor in the list (torch's multi-tensor-per-process form is not supported).
void checkSingle(const std::vector<at::Tensor>& tensors, const char* op);
// A rank of this group (roots, peers).
void checkRank(int64_t rank, int size, const char* op, const char* what);
// A root rank of this group, and root tensor 0 (one tensor per process).
void checkRoot(int64_t rootRank, int64_t rootTensor, int size, const char* op);
// Same dtype and element count as the reference, for every tensor of a list of `expected` length.
void checkList(const std::vector<at::Tensor>& list, size_t expected, const at::Tensor& like,
               const char* op, const char* what);

// The flat forms (all_gather_into_tensor, reduce_scatter_tensor): two dense CPU tensors of one
// dtype, `large` holding `times` as many elements as `small`.
void checkFlatPair(const at::Tensor& large, const at::Tensor& small, int times, const char* op,
                   const char* largeName);

// Collectives that move data without reducing it move bytes: every dtype works, bool included.
size_t byteCount(const at::Tensor& t);

}  // namespace chorus::torch_backend
