#include "optimizer_state.h"

#include <stdexcept>

namespace chorus::train {
namespace {

// The key LibTorch's optimizers file a parameter's state under.
std::string stateKey(const at::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }

}  // namespace

TrainOptimizer::TrainOptimizer(const std::string& kind,
                               const std::vector<std::pair<std::string, at::Tensor>>& params,
                               double lr, double momentum)
    : kind_(kind), lr_(lr) {
  for (const auto& [name, p] : params) params_.push_back(p);
  if (kind == "sgd") {
    auto sgd = std::make_unique<torch::optim::SGD>(params_,
                                                   torch::optim::SGDOptions(lr).momentum(momentum));
    if (momentum != 0) {
      for (const auto& [name, p] : params) {
        auto s = std::make_unique<torch::optim::SGDParamState>();
        s->momentum_buffer(torch::zeros_like(p));
        state_.emplace_back(name + "/momentum", s->momentum_buffer());
        sgd->state()[stateKey(p)] = std::move(s);
      }
    }
    opt_ = std::move(sgd);
  } else if (kind == "adam") {
    auto adam = std::make_unique<torch::optim::Adam>(params_, torch::optim::AdamOptions(lr));
    for (const auto& [name, p] : params) {
      auto s = std::make_unique<torch::optim::AdamParamState>();
      s->step(0);
      s->exp_avg(torch::zeros_like(p));
      s->exp_avg_sq(torch::zeros_like(p));
      state_.emplace_back(name + "/exp_avg", s->exp_avg());
      state_.emplace_back(name + "/exp_avg_sq", s->exp_avg_sq());
      adam->state()[stateKey(p)] = std::move(s);
    }
    opt_ = std::move(adam);
  } else {
    throw std::invalid_argument("unknown optimizer " + kind);
  }
}

void TrainOptimizer::step() {
  opt_->step();
  if (checked_) return;
  checked_ = true;
  // Had the keys not matched LibTorch's, it would have created state of its own, not copied or
  // checkpointed: better to stop than to resume differently.
  if (!state_.empty() && opt_->state().size() != params_.size()) {
    throw std::logic_error("optimizer state was not found under the expected keys (" +
                           std::to_string(opt_->state().size()) + " entries for " +
                           std::to_string(params_.size()) + " parameters)");
  }
}

void TrainOptimizer::setLearningRate(double lr) {
  lr_ = lr;
  for (auto& group : opt_->param_groups()) group.options().set_lr(lr);
}

void TrainOptimizer::setStepCount(int64_t steps) {
  if (kind_ != "adam") return;
  for (const auto& p : params_) {
    auto& s = static_cast<torch::optim::AdamParamState&>(*opt_->state().at(stateKey(p)));
    s.step(steps);
  }
}

}  // namespace chorus::train
