// torch's Work for Chorus operations: completion, failure, wait with and without timeout, and
// the TensorList future that DDP's reducer needs. One WorkChorus covers one or more Chorus
// operations (a coalesced call of mixed dtypes issues several); WorkBatch joins the Works issued
// between startCoalescing and endCoalescing.
//
// The state lives here, not in c10d::Work's protected members, whose types changed between torch
// releases; the base class only hears of the end through finish() (for the profiler).
#pragma once

#include "future_completer.h"

#include <chorus/work.hpp>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace chorus::torch_backend {

// What WorkChorus and WorkBatch share: a completion record with its own lock, the future, and
// listeners told of the end.
class WorkBase : public c10d::Work {
 public:
  WorkBase(int rank, c10d::OpType type, const char* profilingTitle, std::vector<at::Tensor> outputs,
           std::shared_ptr<FutureCompleter> completer);
  ~WorkBase() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  // Calls fn (never under a lock of this Work) once this Work has completed, at once if it has.
  void whenDone(std::function<void()> fn);

 protected:
  // Records the end (once), wakes the waiters, runs the listeners and posts the future.
  void complete(std::exception_ptr error);
  // Blocks until complete() ran; rethrows the failure.
  void waitCompleted();

  std::vector<at::Tensor> outputs_;

 private:
  void completeFuture();

  std::shared_ptr<FutureCompleter> completer_;
  // Made by the first getFuture() (guarded by mu_): most Works are only waited for.
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  mutable std::mutex mu_;
  std::condition_variable doneCv_;
  // Guarded by mu_.
  bool done_ = false;
  std::exception_ptr error_;
  bool futureWanted_ = false;
  bool futureDone_ = false;
  std::vector<std::function<void()>> listeners_;
};

class WorkChorus : public WorkBase {
 public:
  // outputs: what result() and the future give. keepAlive: tensors and buffers the operation
  // reads or writes (staging copies, counts), held until it finishes. copyOut: runs once every
  // part succeeded, before anyone sees the Work complete (from staging into the caller's tensors).
  WorkChorus(int rank, c10d::OpType type, const char* profilingTitle,
             std::vector<at::Tensor> outputs, std::vector<at::Tensor> keepAlive,
             std::function<void()> copyOut, std::shared_ptr<FutureCompleter> completer);
  ~WorkChorus() override;

  // Ties this Work to the Chorus operations, in issue order; call once, right after issuing
  // them (at least one).
  static void attach(const c10::intrusive_ptr<WorkChorus>& self, std::vector<chorus::Work> parts);
  // Instead of attach: the operation failed before it returned a Chorus work (a blocking call
  // that ran and failed on the caller's thread); wait() rethrows the failure, in torch's words
  // as a part's (error_text.h).
  void fail(std::exception_ptr error);

  bool wait(std::chrono::milliseconds timeout) override;
  int sourceRank() const override { return sourceRank_; }
  void setSourceRank(int r) { sourceRank_ = r; }
  // Anything else the operation needs alive until it finishes (count arrays).
  void holdAlso(std::shared_ptr<void> extra) { extra_ = std::move(extra); }
  // Runs when a Python signal handler raised (Ctrl-C) while Python's main thread waited here
  // (python/ext/common/signal_wait.h); the exception then goes to Python.
  void setOnSignal(std::function<void()> fn) { onSignal_ = std::move(fn); }

 private:
  void partDone(std::exception_ptr error);

  std::vector<chorus::Work> parts_;
  std::vector<at::Tensor> keepAlive_;
  std::shared_ptr<void> extra_;
  std::function<void()> copyOut_;
  std::function<void()> onSignal_;
  // Guarded by partsMu_: parts not finished yet, and the first failure among them.
  std::mutex partsMu_;
  size_t partsLeft_ = 0;
  std::exception_ptr firstError_;
  int sourceRank_ = -1;
};

// The Works of one coalescing batch (startCoalescing .. endCoalescing) as one: complete when all
// are, failed with the first failure, result() the outputs of all in issue order.
class WorkBatch : public WorkBase {
 public:
  WorkBatch(int rank, std::vector<c10::intrusive_ptr<WorkChorus>> works,
            std::shared_ptr<FutureCompleter> completer);
  ~WorkBatch() override;

  static void start(const c10::intrusive_ptr<WorkBatch>& self);
  bool wait(std::chrono::milliseconds timeout) override;

 private:
  std::vector<c10::intrusive_ptr<WorkChorus>> works_;
};

}  // namespace chorus::torch_backend
