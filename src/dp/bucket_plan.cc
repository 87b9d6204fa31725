#include "dp/bucket_plan.h"

namespace chorus::dp {

std::vector<std::vector<size_t>> planBuckets(const std::vector<size_t>& tensorBytes,
                                             size_t bucketBytes) {
  std::vector<std::vector<size_t>> buckets;
  size_t filled = 0;
  for (size_t i = tensorBytes.size(); i-- > 0;) {
    if (buckets.empty() || filled + tensorBytes[i] > bucketBytes) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(i);
    filled += tensorBytes[i];
  }
  return buckets;
}

}  // namespace chorus::dp
