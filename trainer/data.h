// Fashion-MNIST (or MNIST) from the compressed IDX files, and a DistributedSampler-style shard.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::train {

struct Dataset {
  std::vector<uint8_t> images;  // count * 28 * 28, row-major
  std::vector<uint8_t> labels;  // count
  size_t count = 0;
  static constexpr size_t kPixels = 28 * 28;
};

// Reads DIR/PREFIX-images-idx3-ubyte.gz and DIR/PREFIX-labels-idx1-ubyte.gz (PREFIX: "train" or
// "t10k"), keeping at most `limit` samples (0: all). Throws std::runtime_error with the path.
Dataset loadIdx(const std::string& dir, const std::string& prefix, size_t limit = 0);

// This rank's indices for one epoch, like torch's DistributedSampler: a permutation of [0, n)
// from (seed, epoch) that is the same on every rank (or the identity when !shuffle), padded by
// wrapping around to a multiple of `ranks`, then every ranks-th index from `rank`. Every rank gets
// the same number of samples, hence the same number of steps.
std::vector<size_t> shardIndices(size_t n, int rank, int ranks, uint64_t seed, int epoch,
                                 bool shuffle);

}  // namespace chorus::train
