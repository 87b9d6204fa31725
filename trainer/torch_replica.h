// LibTorch adapter for chorus::dp::Replica: registers a module's parameters and reports each
// gradient from autograd as soon as it is accumulated into p.grad(). See docs/dp.md.
#pragma once

#include <torch/nn/module.h>
#include <chorus/communicator.hpp>
#include <chorus/dp.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace chorus::torch_dp {

class TorchReplica {
 public:
  // Registers module.parameters() (f32, contiguous, CPU) in forward order, allocates every p.grad()
  // up front (zeros) and adds a post-hook to each parameter's gradient accumulator that calls
  // Replica::gradientReady once the gradient has been added into p.grad(). The module and the
  // communicator must outlive this object.
  TorchReplica(Communicator& comm, torch::nn::Module& module, dp::Options options = {});
  // The same, owning the communicator (required in elastic mode: dp::Replica::communicator()).
  // The module's f32 buffers are registered as Replica state, so synchronize() copies them.
  TorchReplica(std::unique_ptr<Communicator> comm, torch::nn::Module& module,
               dp::Options options = {});
  ~TorchReplica();  // removes the hooks
  TorchReplica(const TorchReplica&) = delete;
  TorchReplica& operator=(const TorchReplica&) = delete;

  // Copies root's parameters and f32 buffers to every rank.
  void broadcast(int root = 0);
  // dp::Replica::synchronize: parameters, buffers and registered state from the most advanced
  // rank (rank 0 at the start); a newcomer receives the running job's state this way.
  void synchronize() { replica_->synchronize(); }
  // The registered parameters with their names, in registration order.
  const std::vector<std::pair<std::string, at::Tensor>>& namedParameters() const { return named_; }
  Communicator& communicator() const { return replica_->communicator(); }

  void beginStep();
  bool waitGradients();  // false on accumulation micro-steps: no optimizer step, no zeroing
  void afterOptimizerStep();
  // Zeroes every p.grad() in place (the Replica holds pointers into that storage).
  void zeroGradients();
  // LocalSgd, DiLoCo: averages the parameters once more (end of training), unless they are
  // identical on every rank already (compared by hash). True when it averaged.
  bool averageParameters();

  // dp::Replica's parameter hash and cross-rank comparison (a collective).
  uint64_t parameterHash() const;
  std::vector<int> ranksDifferingFromRoot();

  // Gradients reported by the hooks during the last micro-step (the rest are taken as final in
  // waitGradients).
  size_t hookReports() const { return hookReports_; }
  size_t parameterCount() const { return params_.size(); }
  size_t parameterElements() const;
  dp::Replica& replica() { return *replica_; }
  const dp::StepMetrics& lastMetrics() const { return replica_->lastMetrics(); }

 private:
  void registerModule();
  void onGradient(size_t index);

  torch::nn::Module& module_;
  std::vector<at::Tensor> params_;
  std::vector<std::pair<std::string, at::Tensor>> named_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hookKeys_;
  std::unique_ptr<dp::Replica> replica_;
  size_t hookReports_ = 0;
};

}  // namespace chorus::torch_dp
