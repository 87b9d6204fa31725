// all_reduce of a sparse COO tensor (ReduceOp.SUM, as torch's gloo backend offers it on the
// CPU): every rank's coalesced indices and values are gathered (all_gather_v, each rank sends its
// own number of entries) and their union is coalesced, which adds the values of equal indices.
// Every rank then holds the same coalesced sum, in place of its input.
//
// The shapes travel first (an all_gather of a small header) in a blocking step on the calling
// thread, bounded by the group's timeout: the sizes of the second step depend on them.
#include "process_group_chorus.h"
#include "tensor_args.h"

#include <chorus/error.hpp>

#include <c10/util/Exception.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace chorus::torch_backend {
namespace {

// What every rank's tensor must agree on, and its number of entries (first).
std::vector<int64_t> headerOf(const at::Tensor& t) {
  std::vector<int64_t> h{t._nnz(), t.sparse_dim(), t.dense_dim(),
                         static_cast<int64_t>(t.scalar_type())};
  for (auto s : t.sizes()) h.push_back(s);
  return h;
}

std::string describe(const std::vector<int64_t>& h) {
  std::ostringstream s;
  s << c10::toString(static_cast<at::ScalarType>(h[3])) << " of size [";
  for (size_t i = 4; i < h.size(); ++i) s << (i > 4 ? ", " : "") << h[i];
  s << "] with " << h[1] << " sparse dims";
  return s.str();
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allreduceSparse(
    at::Tensor& tensor, const c10d::AllreduceOptions& opts) {
  const char* op = "all_reduce of a sparse tensor";
  TORCH_CHECK_VALUE(tensor.layout() == at::kSparse, "chorus backend: ", op,
                    ": only the sparse COO layout is supported, got ", tensor.layout());
  TORCH_CHECK_VALUE(tensor.device().is_cpu(), "chorus backend: ", op,
                    ": only CPU tensors are supported, got one on ", tensor.device());
  const auto red = static_cast<c10d::ReduceOp::RedOpType>(opts.reduceOp.op_);
  TORCH_CHECK_VALUE(red == c10d::ReduceOp::SUM, "chorus backend: ", op,
                    ": only ReduceOp.SUM is supported");
  Communicator& comm = communicator(op);
  TORCH_CHECK_VALUE(tensor.sparse_dim() > 0, "chorus backend: ", op,
                    ": the tensor has no sparse dimension");
  const at::Tensor in = tensor.coalesce();
  const std::vector<int64_t> mine = headerOf(in);
  const auto n = static_cast<size_t>(getSize());
  std::vector<int64_t> headers(mine.size() * n);
  try {
    comm.allGather(mine.data(), headers.data(), mine.size(), DataType::kI64).wait();
  } catch (const Error& e) {
    TORCH_CHECK(false, "chorus backend: ", op, " (rank ", getRank(), "): ", e.what());
  }
  // The counts of the second step, in elements of int64 (indices) and bytes (values).
  auto counts = std::make_shared<std::pair<std::vector<size_t>, std::vector<size_t>>>();
  const int64_t sparseDim = in.sparse_dim();
  int64_t rowBytes = static_cast<int64_t>(c10::elementSize(in.scalar_type()));
  for (auto d : in.sizes().slice(static_cast<size_t>(sparseDim))) rowBytes *= d;
  int64_t total = 0;
  for (size_t r = 0; r < n; ++r) {
    const std::vector<int64_t> theirs(
        headers.begin() + static_cast<int64_t>(r * mine.size()),
        headers.begin() + static_cast<int64_t>((r + 1) * mine.size()));
    TORCH_CHECK_VALUE(std::equal(theirs.begin() + 1, theirs.end(), mine.begin() + 1),
                      "chorus backend: ", op, " (rank ", getRank(), "): rank ", r, " passes a ",
                      describe(theirs), ", this rank a ", describe(mine));
    counts->first.push_back(static_cast<size_t>(theirs[0] * sparseDim));
    counts->second.push_back(static_cast<size_t>(theirs[0] * rowBytes));
    total += theirs[0];
  }
  // Indices as rows of sparseDim entries, one row per value: rank r's rows follow rank r-1's.
  // Every buffer holds at least one row, so that none is empty (no null pointers).
  const int64_t nnz = in._nnz();
  at::Tensor indices = at::zeros({std::max<int64_t>(nnz, 1), sparseDim}, in._indices().options());
  indices.narrow(0, 0, nnz).copy_(in._indices().t());
  std::vector<int64_t> rowShape;
  for (auto d : in._values().sizes().slice(1)) rowShape.push_back(d);
  auto rows = [&](int64_t count) {
    std::vector<int64_t> shape{std::max<int64_t>(count, 1)};
    shape.insert(shape.end(), rowShape.begin(), rowShape.end());
    return at::zeros(shape, in._values().options());
  };
  at::Tensor values = rows(nnz);
  values.narrow(0, 0, nnz).copy_(in._values());
  at::Tensor allIndices =
      at::empty({std::max<int64_t>(total, 1), sparseDim}, in._indices().options());
  at::Tensor allValues = rows(total);
  auto copyOut = [tensor, allIndices, allValues, total] {
    at::Tensor sum = at::sparse_coo_tensor(allIndices.narrow(0, 0, total).t(),
                                           allValues.narrow(0, 0, total), tensor.sizes())
                         .coalesce();
    at::Tensor target = tensor;
    target.copy_(sum);
  };
  return launchParts(
      c10d::OpType::ALLREDUCE, "chorus:all_reduce_sparse", {tensor},
      {indices, values, allIndices, allValues}, std::move(copyOut),
      [&](std::vector<chorus::Work>& parts) {
        parts.push_back(comm_->allGatherV(indices.data_ptr(), allIndices.data_ptr(),
                                          counts->first.data(), DataType::kI64));
        parts.push_back(comm_->allGatherV(values.data_ptr(), allValues.data_ptr(),
                                          counts->second.data(), DataType::kU8));
      },
      counts);
}

#if TORCH_VERSION_MAJOR >= 2
c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allreduce_sparse(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  TORCH_CHECK_VALUE(tensors.size() == 1,
                    "chorus backend: allreduce_sparse takes exactly one "
                    "tensor per process, got ",
                    tensors.size());
  return allreduceSparse(tensors[0], opts);
}
#endif

}  // namespace chorus::torch_backend
