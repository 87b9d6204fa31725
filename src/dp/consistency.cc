#include "dp/consistency.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace chorus::dp {
namespace {

constexpr uint64_t kMul1 = 0x9e3779b97f4a7c15ull;  // 2^64 / golden ratio
constexpr uint64_t kMul2 = 0xd6e8feb86659fd93ull;

uint64_t mixWord(uint64_t lane, uint64_t word) {
  return std::rotl(lane ^ (word * kMul2), 29) * kMul1;
}

// Spreads every input bit over the whole result (xor-shift-multiply finaliser).
uint64_t avalanche(uint64_t h) {
  h ^= h >> 32;
  h *= kMul2;
  h ^= h >> 29;
  h *= kMul1;
  return h ^ (h >> 32);
}

}  // namespace

uint64_t hashParameters(const std::vector<Tensor>& tensors) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const Tensor& t : tensors) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(t.data);
    for (size_t i = 0; i < t.count * sizeof(float); ++i) {
      h = (h ^ bytes[i]) * 0x100000001b3ull;
    }
  }
  return h;
}

uint64_t hashBytes(uint64_t seed, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t lane[4] = {seed + 1, seed + kMul1, seed + kMul2, seed ^ 0x5851f42d4c957f2dull};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * static_cast<size_t>(k), sizeof w);
      lane[k] = mixWord(lane[k], w);
    }
  }
  uint64_t h = bytes;  // the length too: a tail of zeros must not vanish
  for (int k = 0; k < 4; ++k) h = mixWord(std::rotl(h, 17) + lane[k], lane[k]);
  for (; i < bytes; ++i) h = mixWord(h, p[i]);
  return avalanche(h);
}

std::vector<int> ranksDifferingFromRoot(Communicator& comm, uint64_t hash) {
  // int64 so the all-gather moves the bits unchanged.
  int64_t mine;
  std::memcpy(&mine, &hash, sizeof mine);
  std::vector<int64_t> all(static_cast<size_t>(comm.size()));
  comm.allGather(std::span<const int64_t>(&mine, 1), std::span<int64_t>(all)).wait();
  std::vector<int> differ;
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) differ.push_back(static_cast<int>(r));
  }
  return differ;
}

double largestDeviation(const float* own, const float* average, size_t count) {
  double worst = 0;
  for (size_t i = 0; i < count; ++i) {
    const double d = std::fabs(static_cast<double>(own[i]) - static_cast<double>(average[i]));
    // A NaN must show, not be skipped by max: infinity exceeds every limit.
    if (std::isnan(d)) return HUGE_VAL;
    worst = std::max(worst, d);
  }
  return worst;
}

double divergenceFromDeviations(Communicator& comm, double localDeviation) {
  double worst = localDeviation;
  comm.allReduce(std::span<double>(&worst, 1), ReduceOp::kMax).wait();
  return 2 * worst;
}

double measureDivergence(Communicator& comm, const std::vector<Tensor>& tensors) {
  size_t total = 0;
  for (const Tensor& t : tensors) total += t.count;
  std::vector<float> own(total), average(total);
  size_t at = 0;
  for (const Tensor& t : tensors) {
    std::copy(t.data, t.data + t.count, own.begin() + static_cast<std::ptrdiff_t>(at));
    at += t.count;
  }
  comm.allReduce(own.data(), average.data(), total, DataType::kF32, ReduceOp::kAvg).wait();
  return divergenceFromDeviations(comm, largestDeviation(own.data(), average.data(), total));
}

}  // namespace chorus::dp
