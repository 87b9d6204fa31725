// The trainer's models, batches and evaluation (model.h).
#include "model.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace chorus::train {
namespace {

constexpr float kMean = 0.2860f;  // Fashion-MNIST pixel mean and standard deviation
constexpr float kStd = 0.3530f;

}  // namespace

torch::nn::Sequential makeModel(const std::string& name) {
  namespace nn = torch::nn;
  if (name == "cnn") {
    return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 16, 5).padding(2)), nn::ReLU(),
                          nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(16, 32, 5).padding(2)),
                          nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Linear(32 * 7 * 7, 128),
                          nn::ReLU(), nn::Linear(128, 10));
  }
  return nn::Sequential(nn::Flatten(), nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 256),
                        nn::ReLU(), nn::Linear(256, 10));
}

std::pair<torch::Tensor, torch::Tensor> makeBatch(const Dataset& d, const size_t* idx, size_t n) {
  auto x = torch::empty({static_cast<int64_t>(n), 1, 28, 28}, torch::kFloat);
  auto y = torch::empty({static_cast<int64_t>(n)}, torch::kLong);
  float* xp = x.data_ptr<float>();
  int64_t* yp = y.data_ptr<int64_t>();
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* img = d.images.data() + idx[i] * Dataset::kPixels;
    for (size_t k = 0; k < Dataset::kPixels; ++k) {
      xp[i * Dataset::kPixels + k] = (static_cast<float>(img[k]) / 255.0f - kMean) / kStd;
    }
    yp[i] = d.labels[idx[i]];
  }
  return {x, y};
}

double evaluate(torch::nn::Sequential& model, const Dataset& test, chorus::Communicator& comm) {
  torch::NoGradGuard guard;
  model->eval();
  int64_t counts[2] = {0, 0};  // correct, seen
  std::vector<size_t> idx;
  for (size_t i = static_cast<size_t>(comm.rank()); i < test.count;
       i += static_cast<size_t>(comm.size())) {
    idx.push_back(i);
  }
  for (size_t b = 0; b < idx.size(); b += 500) {
    size_t n = std::min<size_t>(500, idx.size() - b);
    auto [x, y] = makeBatch(test, idx.data() + b, n);
    auto pred = model->forward(x).argmax(1);
    counts[0] += pred.eq(y).sum().item<int64_t>();
    counts[1] += static_cast<int64_t>(n);
  }
  comm.allReduce(std::span<int64_t>(counts, 2), chorus::ReduceOp::kSum).wait();
  model->train();
  return counts[1] == 0 ? 0.0 : static_cast<double>(counts[0]) / static_cast<double>(counts[1]);
}

}  // namespace chorus::train
