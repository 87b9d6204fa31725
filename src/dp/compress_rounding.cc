#include "dp/compress_rounding.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace chorus::dp {

float roundToBf16(float x) {
  if (std::isnan(x)) return x;
  uint32_t b = std::bit_cast<uint32_t>(x);
  b += 0x7fffu + ((b >> 16) & 1u);  // ties to even; overflows carry into infinity
  return std::bit_cast<float>(b & 0xffff0000u);
}

float roundToFp16(float x) {
  if (!std::isfinite(x)) return x;
  const float a = std::fabs(x);
  // 65504 is the largest half; from the midpoint to the next power of two on, infinity.
  if (a >= 65520.0f) return std::copysign(std::numeric_limits<float>::infinity(), x);
  if (a < 0x1p-14f) {
    // Subnormal halves: multiples of 2^-24 (the scaling is exact; nearbyint rounds to even).
    return std::nearbyint(x * 0x1p24f) * 0x1p-24f;
  }
  uint32_t b = std::bit_cast<uint32_t>(x);
  b += 0xfffu + ((b >> 13) & 1u);  // keep 10 of the 23 mantissa bits, ties to even
  return std::bit_cast<float>(b & ~0x1fffu);
}

void roundToInt8Blocks(float* data, size_t count) {
  for (size_t base = 0; base < count; base += kInt8Block) {
    const size_t n = std::min(kInt8Block, count - base);
    float* x = data + base;
    float m = 0;
    for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
    const float scale = m / 127.0f;
    if (!(scale > 0.0f)) {  // zeros, or a NaN scale: the wire says 0
      std::fill(x, x + n, 0.0f);
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      const float q = std::clamp(std::nearbyint(x[i] / scale), -127.0f, 127.0f);
      x[i] = q * scale;
    }
  }
}

void roundTo(Compression kind, float* data, size_t count) {
  switch (kind) {
    case Compression::kBf16:
      for (size_t i = 0; i < count; ++i) data[i] = roundToBf16(data[i]);
      return;
    case Compression::kFp16:
      for (size_t i = 0; i < count; ++i) data[i] = roundToFp16(data[i]);
      return;
    case Compression::kInt8:
      roundToInt8Blocks(data, count);
      return;
    case Compression::kNone:
    case Compression::kPowerSgd:
      return;
  }
}

RoundingCompressor::RoundingCompressor(Compression kind, size_t count, bool errorFeedback)
    : kind_(kind), count_(count), errorFeedback_(errorFeedback) {
  if (errorFeedback_) error_.assign(count_, 0.0f);
}

void RoundingCompressor::compress(float* data) {
  if (!errorFeedback_) {
    roundTo(kind_, data, count_);
    return;
  }
  // error holds e = g + err until rounded, then e - round(e).
  for (size_t i = 0; i < count_; ++i) {
    data[i] += error_[i];
    error_[i] = data[i];
  }
  roundTo(kind_, data, count_);
  for (size_t i = 0; i < count_; ++i) error_[i] -= data[i];
}

void RoundingCompressor::reset() { std::fill(error_.begin(), error_.end(), 0.0f); }

}  // namespace chorus::dp
