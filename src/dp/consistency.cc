#include "dp/consistency.h"

#include <algorithm>
#include <cstring>

namespace chorus::dp {

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

double measureDivergence(Communicator& comm, const std::vector<Tensor>& tensors) {
  size_t total = 0;
  for (const Tensor& t : tensors) total += t.count;
  std::vector<float> hi(total), lo(total);
  size_t at = 0;
  for (const Tensor& t : tensors) {
    std::copy(t.data, t.data + t.count, hi.begin() + static_cast<std::ptrdiff_t>(at));
    at += t.count;
  }
  lo = hi;
  Work a = comm.allReduce(std::span<float>(hi), ReduceOp::kMax);
  Work b = comm.allReduce(std::span<float>(lo), ReduceOp::kMin);
  a.wait();
  b.wait();
  double worst = 0;
  for (size_t i = 0; i < total; ++i) {
    worst = std::max(worst, static_cast<double>(hi[i]) - static_cast<double>(lo[i]));
  }
  return worst;
}

}  // namespace chorus::dp
