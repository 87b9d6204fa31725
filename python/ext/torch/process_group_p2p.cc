// all_to_all (single and list) and point-to-point send / recv of the chorus backend: the
// operations whose counts differ per peer or that involve one peer only.
#include "process_group_chorus.h"
#include "tensor_args.h"
#include "tensor_staging.h"

#include <c10/util/Exception.h>

#include <cstring>
#include <numeric>

namespace chorus::torch_backend {

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
    std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& opts) {
  checkCpuDense(input, "all_to_all_single");
  checkCpuDense(output, "all_to_all_single");
  TORCH_CHECK_TYPE(input.scalar_type() == output.scalar_type(),
                   "chorus backend: all_to_all_single: output dtype ", output.scalar_type(),
                   " differs from input dtype ", input.scalar_type());
  const auto n = static_cast<size_t>(getSize());
  const at::Tensor in = contiguousOf(input);
  at::Tensor out = contiguousOf(output);
  auto copyOut = copyBack(output, out);
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK_VALUE(in.numel() == out.numel() && in.numel() % getSize() == 0,
                      "chorus backend: all_to_all_single without split sizes needs input and "
                      "output of the same size, divisible by the world size (",
                      getSize(), "); got ", in.numel(), " and ", out.numel(), " elements");
    return launch(
        c10d::OpType::ALLTOALL_BASE, "chorus:all_to_all_single", {output}, {in, out},
        std::move(copyOut),
        [&](Run run) {
          return comm_->allToAll(in.data_ptr(), out.data_ptr(), byteCount(in) / n, DataType::kU8,
                                 run);
        },
        nullptr, -1, runFor(opts));
  }
  // Split sizes count rows (the first dimension); an empty list means equal parts.
  auto countsFor = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* what) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const size_t rowBytes = rows == 0 ? 0 : byteCount(t) / static_cast<size_t>(rows);
    std::vector<size_t> counts(n);
    if (splits.empty()) {
      TORCH_CHECK_VALUE(rows % getSize() == 0, "chorus backend: all_to_all_single: ", what, " has ",
                        rows, " rows, not divisible by the world size ", getSize());
      std::fill(counts.begin(), counts.end(), rowBytes * static_cast<size_t>(rows / getSize()));
      return counts;
    }
    TORCH_CHECK_VALUE(splits.size() == n, "chorus backend: all_to_all_single: ", what,
                      " split sizes have ", splits.size(), " entries, expected ", n);
    int64_t sum = 0;
    for (size_t r = 0; r < n; ++r) {
      TORCH_CHECK_VALUE(splits[r] >= 0, "chorus backend: all_to_all_single: negative split size");
      sum += splits[r];
      counts[r] = static_cast<size_t>(splits[r]) * rowBytes;
    }
    TORCH_CHECK_VALUE(sum == rows, "chorus backend: all_to_all_single: ", what,
                      " split sizes add up to ", sum, " rows, but the tensor has ", rows);
    return counts;
  };
  auto counts = std::make_shared<std::pair<std::vector<size_t>, std::vector<size_t>>>(
      countsFor(in, inputSplits, "the input"), countsFor(out, outputSplits, "the output"));
  return launch(
      c10d::OpType::ALLTOALL_BASE, "chorus:all_to_all_single", {output}, {in, out},
      std::move(copyOut),
      [&](Run run) {
        return comm_->allToAllV(in.data_ptr(), counts->first.data(), out.data_ptr(),
                                counts->second.data(), DataType::kU8, run);
      },
      counts, -1, runFor(opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  const auto n = static_cast<size_t>(getSize());
  TORCH_CHECK_VALUE(inputs.size() == n && outputs.size() == n, "chorus backend: all_to_all takes ",
                    n, " input and ", n, " output tensors, got ", inputs.size(), " and ",
                    outputs.size());
  for (size_t r = 0; r < n; ++r) {
    checkCpuDense(inputs[r], "all_to_all");
    checkCpuDense(outputs[r], "all_to_all");
    TORCH_CHECK_TYPE(inputs[r].scalar_type() == inputs[0].scalar_type() &&
                         outputs[r].scalar_type() == inputs[0].scalar_type(),
                     "chorus backend: all_to_all needs tensors of one dtype");
  }
  auto counts = std::make_shared<std::pair<std::vector<size_t>, std::vector<size_t>>>();
  for (size_t r = 0; r < n; ++r) {
    counts->first.push_back(byteCount(inputs[r]));
    counts->second.push_back(byteCount(outputs[r]));
  }
  at::Tensor in = byteBuffer(totalBytes(inputs));
  packInto(bytesOf(in), inputs);
  at::Tensor flat = byteBuffer(totalBytes(outputs));
  std::vector<at::Tensor> outs = outputs;
  auto copyOut = unpackInto(outs, flat);
  return launch(
      c10d::OpType::ALLTOALL, "chorus:all_to_all", outputs, {in, flat}, std::move(copyOut),
      [&](Run run) {
        return comm_->allToAllV(in.data_ptr(), counts->first.data(), flat.data_ptr(),
                                counts->second.data(), DataType::kU8, run);
      },
      counts, -1, runFor(opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::send(std::vector<at::Tensor>& tensors,
                                                        int dstRank, int /*tag*/) {
  checkSingle(tensors, "send");
  checkRank(dstRank, getSize(), "send", "destination rank");
  TORCH_CHECK_VALUE(dstRank != getRank(), "chorus backend: send: rank ", getRank(),
                    " cannot send to itself");
  const at::Tensor buf = contiguousOf(tensors[0]);
  return launch(c10d::OpType::SEND, "chorus:send", {}, {buf}, nullptr, [&](Run run) {
    return comm_->send(buf.data_ptr(), byteCount(buf), DataType::kU8, dstRank, run);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::recv(std::vector<at::Tensor>& tensors,
                                                        int srcRank, int /*tag*/) {
  checkSingle(tensors, "recv");
  checkRank(srcRank, getSize(), "recv", "source rank");
  TORCH_CHECK_VALUE(srcRank != getRank(), "chorus backend: recv: rank ", getRank(),
                    " cannot receive from itself");
  at::Tensor t = tensors[0];
  at::Tensor buf = contiguousOf(t);
  auto copyOut = copyBack(t, buf);
  return launch(
      c10d::OpType::RECV, "chorus:recv", {t}, {buf}, std::move(copyOut),
      [&](Run run) {
        return comm_->recv(buf.data_ptr(), byteCount(buf), DataType::kU8, srcRank, run);
      },
      nullptr, srcRank);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK(false,
              "chorus backend: recv from any source is not supported; name the source "
              "rank (messages between two ranks arrive in the order they were sent)");
}

}  // namespace chorus::torch_backend
