// The coalesced collectives of torch 2.x (one Chorus call per batch where it can): the into-tensor
// all-gather and reduce-scatter lists that functional collectives and _coalescing_manager issue,
// and startCoalescing / endCoalescing.
#include "process_group_chorus.h"

#include "tensor_args.h"
#include "tensor_staging.h"

#include <chorus/error.hpp>

#include <c10/util/Exception.h>

namespace chorus::torch_backend {

#if TORCH_VERSION_MAJOR >= 2
c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size() && !inputs.empty(),
                    "chorus backend: allgather_into_tensor_coalesced takes as many outputs as "
                    "inputs, at least one; got ",
                    outputs.size(), " and ", inputs.size());
  if (inputs.size() == 1) return _allgather_base(outputs[0], inputs[0], opts);
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkFlatPair(outputs[i], inputs[i], getSize(), "allgather_into_tensor_coalesced", "output");
  }
  // Bytes move unreduced: one all-gather of every input packed together, whatever the dtypes.
  // Rank r's block of the result holds its inputs in order; input i's part goes to row r of
  // output i.
  const auto n = static_cast<size_t>(getSize());
  const size_t block = totalBytes(inputs);
  at::Tensor in = byteBuffer(block);
  packInto(bytesOf(in), inputs);
  at::Tensor flat = byteBuffer(block * n);
  std::vector<at::Tensor> outs = outputs;
  auto copyOut = [outs, flat, block, n]() mutable {
    const uint8_t* src = bytesOf(flat);
    size_t offset = 0;  // of input i's part in each rank's block
    for (auto& out : outs) {
      at::Tensor dst = contiguousOf(out);
      const size_t part = byteCount(out) / n;
      for (size_t r = 0; r < n && part != 0; ++r) {
        std::memcpy(bytesOf(dst) + r * part, src + r * block + offset, part);
      }
      if (!dst.is_same(out)) out.copy_(dst);
      offset += part;
    }
  };
  // OpType has a value of its own for this only after 2.7.
  return launch(
      c10d::OpType::COALESCED, "chorus:all_gather_into_tensor_coalesced", outputs, {in, flat},
      std::move(copyOut),
      [&](Run run) {
        return comm_->allGather(in.data_ptr(), flat.data_ptr(), block, DataType::kU8, run);
      },
      nullptr, -1, runFor(opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size() && !inputs.empty(),
                    "chorus backend: reduce_scatter_tensor_coalesced takes as many outputs as "
                    "inputs, at least one; got ",
                    outputs.size(), " and ", inputs.size());
  if (inputs.size() == 1) return _reduce_scatter_base(outputs[0], inputs[0], opts);
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkFlatPair(inputs[i], outputs[i], getSize(), "reduce_scatter_tensor_coalesced", "input");
  }
  // One reduce-scatter per dtype. Its input holds, for each rank r in turn, row r of every input
  // of that dtype; rank r's result is then the rows of its outputs, one after another.
  const auto n = static_cast<size_t>(getSize());
  struct Group {
    at::Tensor in;
    at::Tensor out;
    Reduction red;
  };
  std::vector<Group> groups;
  std::vector<at::Tensor> keep;
  std::vector<std::function<void()>> copies;
  for (const auto& idx : byDtype(inputs)) {
    std::vector<at::Tensor> ins = pick(inputs, idx);
    for (auto& t : ins) t = contiguousOf(t);
    auto outs = pick(outputs, idx);
    const Reduction red = reductionFor(outs[0], opts.reduceOp, "reduce_scatter_tensor_coalesced");
    int64_t count = 0;
    for (const auto& o : outs) count += o.numel();
    at::Tensor in = at::empty({count * getSize()}, outs[0].options());
    at::Tensor out = at::empty({count}, outs[0].options());
    uint8_t* dst = bytesOf(in);
    for (size_t r = 0; r < n; ++r) {
      for (const auto& t : ins) {
        const size_t part = byteCount(t) / n;
        if (part != 0) std::memcpy(dst, bytesOf(t) + r * part, part);
        dst += part;
      }
    }
    if (red.premul) in.mul_(*red.premul);
    groups.push_back({in, out, red});
    keep.push_back(in);
    keep.push_back(out);
    copies.push_back(unpackInto(outs, out));
  }
  auto copyOut = [copies = std::move(copies)] {
    for (const auto& c : copies) c();
  };
  return launchParts(c10d::OpType::COALESCED, "chorus:reduce_scatter_tensor_coalesced", outputs,
                     std::move(keep), std::move(copyOut), [&](std::vector<chorus::Work>& parts) {
                       for (const auto& g : groups) {
                         parts.push_back(comm_->reduceScatter(g.in.data_ptr(), g.out.data_ptr(),
                                                              static_cast<size_t>(g.out.numel()),
                                                              g.red.type, g.red.op));
                       }
                     });
}

void ProcessGroupChorus::startCoalescing() {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(!coalescing_, "chorus backend: startCoalescing while a batch is open on ",
              describeGroup());
  coalescing_ = true;
  batch_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::endCoalescing() {
  std::vector<c10::intrusive_ptr<WorkChorus>> works;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(coalescing_, "chorus backend: endCoalescing without startCoalescing on ",
                describeGroup());
    coalescing_ = false;
    works.swap(batch_);
  }
  auto batch = c10::make_intrusive<WorkBatch>(getRank(), std::move(works), completer_);
  WorkBatch::start(batch);
  return batch;
}
#endif

}  // namespace chorus::torch_backend
