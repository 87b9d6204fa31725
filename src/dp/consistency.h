// Checks that replicas agree: a bit-level hash for modes that keep them identical (and for
// synchronize(), which copies state only when the hashes differ), and the divergence for
// LocalSgd and DiLoCo, where the replicas drift by design.
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

// A 64-bit hash of raw bytes, continuing from `seed` (0 to start). Eight bytes at a time in
// four independent lanes, so large state hashes at memory speed; any bit difference changes
// it (but for a 2^-64 chance).
uint64_t hashBytes(uint64_t seed, const void* data, size_t bytes);

// All-gathers the hashes; returns the ranks whose hash differs from rank 0's (same on all ranks).
std::vector<int> ranksDifferingFromRoot(Communicator& comm, uint64_t hash);

// The divergence of the ranks' values x_r (docs/dp.md, "Consistency check"):
//   2 * max over elements and ranks of |x_r - mean over ranks of x|,
// which equals max over elements of (max over ranks - min over ranks) for two ranks and lies
// between that and twice that for more. Identical on every rank.

// Local part: max over elements of |own - average| (own and average of the same length).
double largestDeviation(const float* own, const float* average, size_t count);
// From each rank's largestDeviation: one scalar all-reduce (max).
double divergenceFromDeviations(Communicator& comm, double localDeviation);
// When no average is at hand: all-reduces a copy of the tensors (avg), then the scalar.
double measureDivergence(Communicator& comm, const std::vector<Tensor>& tensors);

}  // namespace chorus::dp
