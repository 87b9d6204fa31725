// Checks that replicas agree: a bit-level hash for modes that keep them identical, and the
// divergence (largest difference between ranks) for LocalSgd, where they drift by design.
#pragma once

#include <chorus/communicator.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace chorus::dp {

struct Tensor {
  float* data;
  size_t count;
};

// FNV-1a over the raw bytes of every tensor, in order: any bit difference changes it.
uint64_t hashParameters(const std::vector<Tensor>& tensors);

// All-gathers the hashes; returns the ranks whose hash differs from rank 0's (same on all ranks).
std::vector<int> ranksDifferingFromRoot(Communicator& comm, uint64_t hash);

// max over elements of (max over ranks - min over ranks); identical on every rank.
double measureDivergence(Communicator& comm, const std::vector<Tensor>& tensors);

}  // namespace chorus::dp
