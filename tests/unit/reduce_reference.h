// The reduction kernels' tests' own reference (reduce_test.cc, reduce_cases_test.cc,
// reduce_convert_test.cc): each op and each fp16 / bf16 conversion written here from the formats'
// definitions, not taken from the library's scalar table.
#pragma once

#include <chorus/types.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace chorus::reduce::kerneltest {

template <class F>
using BitsOf = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;

template <class F>
F refQuiet(F x) {
  constexpr BitsOf<F> kQuiet = sizeof(F) == 4 ? BitsOf<F>{1} << 22 : BitsOf<F>{1} << 51;
  return std::bit_cast<F>(static_cast<BitsOf<F>>(std::bit_cast<BitsOf<F>>(x) | kQuiet));
}

// x86's "QNaN floating-point indefinite", the result of inf - inf or 0 * inf.
template <class F>
F defaultNan() {
  if constexpr (sizeof(F) == 4) {
    return std::bit_cast<F>(uint32_t{0xffc00000u});
  } else {
    return std::bit_cast<F>(uint64_t{0xfff8000000000000ull});
  }
}

// The documented contract: sum/prod give quiet(a) if a is NaN, else quiet(b) if b is NaN, else
// the default NaN for an invalid operation; min/max give b if b is NaN or strictly better, else a.
template <class F>
F refFloatOp(ReduceOp op, F a, F b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
    case ReduceOp::kProd: {
      if (std::isnan(a)) return refQuiet(a);
      if (std::isnan(b)) return refQuiet(b);
      const F r = op == ReduceOp::kProd ? a * b : a + b;
      return std::isnan(r) ? defaultNan<F>() : r;
    }
    case ReduceOp::kMin:
      return (std::isnan(b) || b < a) ? b : a;
    case ReduceOp::kMax:
      return (std::isnan(b) || b > a) ? b : a;
  }
  return a;
}

// Wrapping integer arithmetic through uint64_t (conversion to a narrower type is modular).
template <class T>
T refIntOp(ReduceOp op, T a, T b) {
  const auto ua = static_cast<uint64_t>(static_cast<int64_t>(a));
  const auto ub = static_cast<uint64_t>(static_cast<int64_t>(b));
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return static_cast<T>(ua + ub);
    case ReduceOp::kProd:
      return static_cast<T>(ua * ub);
    case ReduceOp::kMin:
      return b < a ? b : a;
    case ReduceOp::kMax:
      return b > a ? b : a;
  }
  return a;
}

// binary16 -> float through the field values (NaN: quiet, payload kept).
inline float refHalfToFloat(uint16_t h) {
  const bool neg = (h & 0x8000u) != 0;
  const int e = (h >> 10) & 31;
  const int m = h & 0x3ff;
  if (e == 31) {
    if (m == 0)
      return neg ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    return std::bit_cast<float>((neg ? 0x80000000u : 0u) | 0x7fc00000u |
                                (static_cast<uint32_t>(m) << 13));
  }
  const double v = e == 0 ? std::ldexp(static_cast<double>(m), -24)
                          : std::ldexp(static_cast<double>(1024 + m), e - 25);
  return static_cast<float>(neg ? -v : v);
}

// float -> binary16 by scaling in double and rounding with nearbyint (ties to even).
inline uint16_t refFloatToHalf(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
  if (std::isinf(f)) return static_cast<uint16_t>(sign | 0x7c00u);
  const double a = std::fabs(static_cast<double>(f));
  if (a == 0) return sign;
  int x = 0;
  (void)std::frexp(a, &x);
  const int e = std::max(x - 1, -14);                      // a in [2^e, 2^(e+1)) or subnormal
  const double r = std::nearbyint(std::ldexp(a, 10 - e));  // in [0, 2048]
  const long bits = (static_cast<long>(e + 14) << 10) + static_cast<long>(r);  // carries ok
  if (bits >= 0x7c00) return static_cast<uint16_t>(sign | 0x7c00u);
  return static_cast<uint16_t>(sign | bits);
}

// bfloat16 -> float through the field values (NaN: the same bits, signalling or not).
inline float refBf16ToFloat(uint16_t b) {
  const bool neg = (b & 0x8000u) != 0;
  const int e = (b >> 7) & 0xff;
  const int m = b & 0x7f;
  if (e == 0xff) {
    if (m == 0)
      return neg ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
  }
  const double v = e == 0 ? std::ldexp(static_cast<double>(m), -133)
                          : std::ldexp(static_cast<double>(128 + m), e - 134);
  return static_cast<float>(neg ? -v : v);
}

inline uint16_t refFloatToBf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40u);
  if (std::isinf(f)) return static_cast<uint16_t>(sign | 0x7f80u);
  const double a = std::fabs(static_cast<double>(f));
  if (a == 0) return sign;
  int x = 0;
  (void)std::frexp(a, &x);
  const int e = std::max(x - 1, -126);
  const double r = std::nearbyint(std::ldexp(a, 7 - e));  // in [0, 256]
  const long bits = (static_cast<long>(e + 126) << 7) + static_cast<long>(r);
  if (bits >= 0x7f80) return static_cast<uint16_t>(sign | 0x7f80u);
  return static_cast<uint16_t>(sign | bits);
}

}  // namespace chorus::reduce::kerneltest
