// How registered tensors are grouped into all-reduce buckets.
#pragma once

#include <cstddef>
#include <vector>

namespace chorus::dp {

// Groups tensors (sizes in bytes, registration order) into buckets, walking in reverse order
// because backward produces the last layers' gradients first. A bucket takes tensors while its
// total stays within bucketBytes; a tensor larger than that gets a bucket of its own.
std::vector<std::vector<size_t>> planBuckets(const std::vector<size_t>& tensorBytes,
                                             size_t bucketBytes);

}  // namespace chorus::dp
