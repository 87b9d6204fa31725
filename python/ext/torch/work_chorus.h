// torch's Work for one Chorus operation: completion, failure, wait with and without timeout,
// and the TensorList future that DDP's reducer needs.
#pragma once

#include "future_completer.h"

#include <chorus/work.hpp>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <memory>
#include <vector>

namespace chorus::torch_backend {

class WorkChorus : public c10d::Work {
 public:
  // outputs: what result() and the future give. keepAlive: tensors and buffers the operation
  // reads or writes (staging copies, counts), held until it finishes. copyOut: runs once the
  // operation succeeded, before anyone sees it complete (from staging into the caller's tensors).
  WorkChorus(int rank, c10d::OpType type, const char* profilingTitle,
             std::vector<at::Tensor> outputs, std::vector<at::Tensor> keepAlive,
             std::function<void()> copyOut, std::shared_ptr<FutureCompleter> completer);
  ~WorkChorus() override;

  // Ties this Work to the Chorus operation; call once, right after issuing it.
  static void attach(const c10::intrusive_ptr<WorkChorus>& self, chorus::Work work);

  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  int sourceRank() const override { return sourceRank_; }
  void setSourceRank(int r) { sourceRank_ = r; }
  // Anything else the operation needs alive until it finishes (count arrays).
  void holdAlso(std::shared_ptr<void> extra) { extra_ = std::move(extra); }

 private:
  void complete(std::exception_ptr error);
  void completeFuture();

  chorus::Work work_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keepAlive_;
  std::shared_ptr<void> extra_;
  std::function<void()> copyOut_;
  std::shared_ptr<FutureCompleter> completer_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  // Guarded by the base class's mutex_: whether getFuture() was called, and whether the future
  // has been completed (it must be exactly once).
  bool futureWanted_ = false;
  bool futureDone_ = false;
  int sourceRank_ = -1;
};

}  // namespace chorus::torch_backend
