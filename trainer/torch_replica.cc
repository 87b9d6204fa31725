#include "torch_replica.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include <span>
#include <stdexcept>
#include <string>

namespace chorus::torch_dp {

namespace {

void checkTensor(const std::string& name, const at::Tensor& t) {
  if (t.scalar_type() != at::kFloat || !t.is_contiguous() || !t.device().is_cpu()) {
    throw std::invalid_argument("TorchReplica: " + name +
                                " must be a contiguous f32 CPU tensor (chorus::dp is f32 only)");
  }
}

}  // namespace

TorchReplica::TorchReplica(Communicator& comm, torch::nn::Module& module, dp::Options options)
    : module_(module), replica_(std::make_unique<dp::Replica>(comm, std::move(options))) {
  registerModule();
}

TorchReplica::TorchReplica(std::unique_ptr<Communicator> comm, torch::nn::Module& module,
                           dp::Options options)
    : module_(module),
      replica_(std::make_unique<dp::Replica>(std::move(comm), std::move(options))) {
  registerModule();
}

void TorchReplica::registerModule() {
  for (auto& item : module_.named_parameters(/*recurse=*/true)) {
    at::Tensor p = item.value();
    if (!p.requires_grad()) continue;
    checkTensor(item.key(), p);
    // The shape lets PowerSGD see matrices (a conv weight: out x (in * k * k)).
    std::vector<size_t> shape(p.sizes().begin(), p.sizes().end());
    if (shape.empty()) shape.push_back(1);  // a scalar parameter
    // The Replica holds the gradient (in its bucket: no copies; set as p.grad() below).
    size_t index =
        replica_->addParameter(item.key(), p.data_ptr<float>(), nullptr, std::move(shape));
    params_.push_back(p);
    named_.emplace_back(item.key(), p);
    // The AccumulateGrad node of a leaf is held weakly by the tensor: keep it alive so the hook
    // stays attached. Its post-hooks run after the new gradient is in p.grad().
    auto acc = torch::autograd::impl::grad_accumulator(p);
    hookKeys_.push_back(acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, index](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list&) {
          onGradient(index);
          return outputs;
        })));
    accumulators_.push_back(std::move(acc));
  }
  replica_->finalize();
  // Each gradient exists before the first backward, so AccumulateGrad adds into the Replica's
  // storage in place (it only allocates when grad is undefined or under create_graph).
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor& p = params_[i];
    p.mutable_grad() = torch::from_blob(replica_->gradient(i), p.sizes(), p.options());
  }
  for (auto& item : module_.named_buffers(/*recurse=*/true)) {
    at::Tensor b = item.value();
    checkTensor("buffer " + item.key(), b);
    replica_->addState("buffer/" + item.key(), b.data_ptr<float>(), static_cast<size_t>(b.numel()));
  }
}

TorchReplica::~TorchReplica() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hookKeys_[i]);
  // The gradients live in the Replica, which goes now: the module keeps copies.
  for (auto& p : params_) {
    if (p.grad().defined()) p.mutable_grad() = p.grad().clone();
  }
}

void TorchReplica::onGradient(size_t index) {
  const at::Tensor& g = params_[index].grad();
  if (!g.defined() || g.data_ptr<float>() == nullptr) {
    throw std::logic_error("TorchReplica: gradient of parameter " + std::to_string(index) +
                           " is undefined after accumulation");
  }
  ++hookReports_;
  replica_->gradientReady(index);
}

void TorchReplica::broadcast(int root) {
  replica_->broadcastParameters(root);
  for (auto& item : module_.named_buffers(/*recurse=*/true)) {
    at::Tensor b = item.value();
    if (b.scalar_type() != at::kFloat || !b.is_contiguous()) {
      throw std::invalid_argument("TorchReplica: buffer " + item.key() + " is not contiguous f32");
    }
    communicator()
        .broadcast(std::span<float>(b.data_ptr<float>(), static_cast<size_t>(b.numel())), root)
        .wait();
  }
}

void TorchReplica::beginStep() {
  hookReports_ = 0;
  replica_->beginStep();
}

bool TorchReplica::waitGradients() {
  // The Replica reads and writes p.grad() through raw pointers: check nobody replaced them.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) {
      throw std::logic_error("TorchReplica: p.grad() of parameter " + std::to_string(i) +
                             " was reset (do not use zero_grad(set_to_none=true))");
    }
  }
  return replica_->waitGradients();
}

void TorchReplica::afterOptimizerStep() { replica_->afterOptimizerStep(); }

void TorchReplica::zeroGradients() {
  torch::NoGradGuard guard;
  for (auto& p : params_) p.mutable_grad().zero_();
}

bool TorchReplica::averageParameters() {
  // Ended right after a sync: the replicas hold the same bits already, which a hash shows
  // without sending the model.
  if (replica_->ranksDifferingFromRoot().empty()) return false;
  torch::NoGradGuard guard;
  std::vector<Work> works;
  for (auto& p : params_) {
    works.push_back(communicator().allReduce(
        std::span<float>(p.data_ptr<float>(), static_cast<size_t>(p.numel())), ReduceOp::kAvg));
  }
  for (auto& w : works) w.wait();
  return true;
}

size_t TorchReplica::parameterElements() const {
  size_t n = 0;
  for (const auto& p : params_) n += static_cast<size_t>(p.numel());
  return n;
}

uint64_t TorchReplica::parameterHash() const { return replica_->parameterHash(); }

std::vector<int> TorchReplica::ranksDifferingFromRoot() {
  return replica_->ranksDifferingFromRoot();
}

}  // namespace chorus::torch_dp
