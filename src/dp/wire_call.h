// The all-reduce of a bucket in a reduced-precision wire format, and the bytes a rank has sent.
#pragma once

#include <chorus/communicator.hpp>
#include <chorus/dp.hpp>

#include <cstddef>
#include <cstdint>

namespace chorus::dp {

// All-reduce (avg) of `count` f32 values in place, travelling as `kind` (kBf16, kFp16, kInt8;
// kNone: f32).
Work allReduceAs(Communicator& comm, float* data, size_t count, Compression kind);

// Bytes this rank has sent on `comm` since its creation (all collectives).
uint64_t bytesSentBy(const Communicator& comm);

}  // namespace chorus::dp
