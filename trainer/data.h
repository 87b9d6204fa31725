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

// The same sharding, step by step, so that the world size may change within an epoch. An epoch
// walks through epochOrder(...) by a global position: a step at position `pos` with `ranks`
// ranks and `batch` samples per rank gives rank r the samples order[(pos + r + j * ranks) % n]
// for j < rows, rows = min(batch, ceil((n - pos) / ranks)), and moves the position on by
// rows * ranks. From position 0 with a fixed world size these are exactly the consecutive
// batches of shardIndices (padding included); after a change the remaining samples are dealt
// out among the new ranks. A position at or past n (the micro-batches that complete the epoch's
// last optimizer step under accumulation) wraps around with full batches.
std::vector<size_t> epochOrder(size_t n, uint64_t seed, int epoch, bool shuffle);
struct Batch {
  std::vector<size_t> indices;  // this rank's samples
  size_t nextPos = 0;           // the global position after this step (>= n: epoch done)
};
Batch batchAt(const std::vector<size_t>& order, size_t pos, int rank, int ranks, size_t batch);

}  // namespace chorus::train
