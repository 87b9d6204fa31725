// The trainer's optimizer (SGD with momentum, or Adam) with its per-parameter state created up
// front, so that the state exists before the first step and can be copied between ranks
// (chorus::dp::Replica::addState) and written to checkpoints.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace chorus::train {

class TrainOptimizer {
 public:
  // `kind`: "sgd" or "adam". The state is what LibTorch would create at the first step (zeros),
  // so the results are the same as with state created lazily.
  TrainOptimizer(const std::string& kind,
                 const std::vector<std::pair<std::string, at::Tensor>>& params, double lr,
                 double momentum);

  void step();
  void setLearningRate(double lr);
  double learningRate() const { return lr_; }
  // The f32 state tensors, named "<param>/exp_avg" etc.; updated in place by step().
  const std::vector<std::pair<std::string, at::Tensor>>& stateTensors() const { return state_; }
  // Adam counts its steps per parameter: set them after the state was replaced (a checkpoint
  // read, a copy from another rank). No-op for SGD.
  void setStepCount(int64_t steps);

 private:
  std::string kind_;
  double lr_;
  std::vector<at::Tensor> params_;
  std::unique_ptr<torch::optim::Optimizer> opt_;
  std::vector<std::pair<std::string, at::Tensor>> state_;
  bool checked_ = false;
};

}  // namespace chorus::train
