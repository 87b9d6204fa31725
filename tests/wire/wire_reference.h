// Independent reference of the reduced-precision ring all-reduce: the same roundings in the same
// order, written out from the algorithm's description (docs/algorithms.md, "Reduced-precision
// wire formats"), with conversions of its own (the compiler's _Float16 for fp16).
#pragma once

#include <chorus/types.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace chorus::wiretest {

inline float bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// One value through a 16-bit format and back.
inline float roundBf16(float f) {
  uint32_t u = bitsOf(f);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;  // nearest, ties to even (no NaNs here)
  return bits(u);
}
inline float roundFp16(float f) { return static_cast<float>(static_cast<_Float16>(f)); }

// A run of values through the wire format and back: int8 blocks start at the run's first value.
inline void roundRun(WireFormat w, float* x, size_t n) {
  if (w == WireFormat::kBf16) {
    for (size_t i = 0; i < n; ++i) x[i] = roundBf16(x[i]);
  } else if (w == WireFormat::kFp16) {
    for (size_t i = 0; i < n; ++i) x[i] = roundFp16(x[i]);
  } else if (w == WireFormat::kInt8Block) {
    for (size_t b = 0; b < n; b += 256) {
      const size_t e = std::min(n, b + 256);
      float top = 0;
      for (size_t i = b; i < e; ++i) top = std::max(top, std::fabs(x[i]));
      const float scale = top / 127.0f;
      for (size_t i = b; i < e; ++i) {
        float q = scale > 0 ? std::nearbyint(x[i] / scale) : 0.0f;
        q = std::clamp(q, -127.0f, 127.0f) + 0.0f;  // an int8 has no -0
        x[i] = q * scale;
      }
    }
  }
}

// Values per segment: segmentBytes of wire bytes, whole int8 blocks of 256 values + 4 bytes.
inline size_t segmentValues(WireFormat w, size_t segmentBytes) {
  if (w == WireFormat::kInt8Block) return std::max<size_t>(1, segmentBytes / 260) * 256;
  return std::max<size_t>(1, segmentBytes / 2);
}

// The ring over `count` values of in[rank], blocks balanced over the n positions (the first
// count % n blocks one longer). Block b is reduced along positions b + 1, b + 2, ..., b: the
// first sends its own values rounded; each next one adds its values to the decoded partial sum
// (in f32) and, unless it is the owner (position b), rounds the result to send it on. The owner
// divides (avg), rounds once, and everyone ends with that rounded value. rankAt(p): the rank at
// ring position p.
template <class RankAt>
void ringReference(WireFormat w, ReduceOp op, int n, size_t segmentBytes,
                   const std::vector<std::vector<float>>& in, size_t offset, size_t count,
                   RankAt rankAt, float* out) {
  const size_t seg = segmentValues(w, segmentBytes);
  const size_t base = count / n, extra = count % n;
  for (int b = 0; b < n; ++b) {
    const size_t ub = static_cast<size_t>(b);
    const size_t start = ub * base + std::min(ub, extra);
    const size_t len = base + (ub < extra ? 1 : 0);
    for (size_t k0 = 0; k0 < len; k0 += seg) {
      const size_t m = std::min(seg, len - k0);
      const size_t at = offset + start + k0;
      std::vector<float> acc(in[rankAt((b + 1) % n)].begin() + at,
                             in[rankAt((b + 1) % n)].begin() + at + m);
      for (int hop = 2; hop <= n; ++hop) {
        roundRun(w, acc.data(), m);  // the previous position sends it
        const auto& mine = in[rankAt((b + hop) % n)];
        for (size_t i = 0; i < m; ++i) acc[i] = mine[at + i] + acc[i];
      }
      if (op == ReduceOp::kAvg) {
        for (float& x : acc) x = x / static_cast<float>(n);
      }
      roundRun(w, acc.data(), m);
      std::copy(acc.begin(), acc.end(), out + at);
    }
  }
}

// The whole all-reduce: one ring forward, or (bothWays) the first (count + 1) / 2 values on the
// ring forward and the rest on the ring backward (position p is rank (n - p) % n). n == 1: a copy.
inline std::vector<float> allReduceReference(WireFormat w, ReduceOp op, size_t segmentBytes,
                                             const std::vector<std::vector<float>>& in,
                                             size_t count, bool bothWays) {
  const int n = static_cast<int>(in.size());
  std::vector<float> out(count);
  if (n == 1) {
    std::copy(in[0].begin(), in[0].begin() + static_cast<long>(count), out.begin());
    return out;
  }
  auto forward = [](int p) { return p; };
  auto backward = [n](int p) { return (n - p) % n; };
  if (!bothWays) {
    ringReference(w, op, n, segmentBytes, in, 0, count, forward, out.data());
  } else {
    const size_t first = (count + 1) / 2;
    ringReference(w, op, n, segmentBytes, in, 0, first, forward, out.data());
    ringReference(w, op, n, segmentBytes, in, first, count - first, backward, out.data());
  }
  return out;
}

// Inputs with values of very different sizes, so that every rounding matters.
inline std::vector<float> wireInput(int rank, size_t count, uint32_t salt) {
  std::vector<float> v(count);
  uint64_t h = 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(rank) + 1) + salt;
  for (size_t i = 0; i < count; ++i) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 29;
    const double unit = static_cast<double>(h >> 11) / static_cast<double>(1ull << 53);  // [0, 1)
    const double mag = std::ldexp(1.0 + unit, static_cast<int>(h % 9) - 4);
    v[i] = static_cast<float>((h & 0x100) ? -mag : mag);
    h += i + 1;
  }
  return v;
}

}  // namespace chorus::wiretest
