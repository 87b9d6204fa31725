// The trainer's models and batches for Fashion-MNIST, and the test-set evaluation.
#pragma once

#include <torch/torch.h>
#include <chorus/chorus.hpp>

#include <cstddef>
#include <string>
#include <utility>

#include "data.h"

namespace chorus::train {

// "cnn" (two convolutions) or the MLP for any other name.
torch::nn::Sequential makeModel(const std::string& name);

// Normalised images [n, 1, 28, 28] and labels [n] for the given sample indices.
std::pair<torch::Tensor, torch::Tensor> makeBatch(const Dataset& d, const size_t* idx, size_t n);

// Test accuracy: each rank evaluates its shard (no padding), the counts are summed over comm, so
// every rank gets the same figure.
double evaluate(torch::nn::Sequential& model, const Dataset& test, chorus::Communicator& comm);

}  // namespace chorus::train
