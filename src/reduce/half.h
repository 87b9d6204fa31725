// Scalar binary16 / bfloat16 <-> float conversions, bit-exact with the F16C instructions.
//
// Internal header of src/reduce/. Everything here has internal linkage (anonymous namespace), so
// each translation unit, whatever its -m flags, gets its own copy and no ISA-specific code can be
// picked by the linker for another TU (see kernels.h).
#pragma once

#include <cstdint>

namespace chorus::reduce {
namespace {

inline uint32_t floatBits(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
}

inline float bitsToFloat(uint32_t u) {
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}

// Exact. A NaN keeps its sign and payload and becomes quiet (as VCVTPH2PS does).
inline float halfToFloatImpl(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) {  // inf or NaN
    return bitsToFloat(sign | 0x7f800000u | (mant << 13) | (mant != 0 ? 0x00400000u : 0u));
  }
  if (exp != 0) return bitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return bitsToFloat(sign);
  // Subnormal: normalise. mant * 2^-24 with mant in [1, 1023].
  int shift = 0;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    ++shift;
  }
  // Leading bit now at bit 10: value = 1.m * 2^(-14 - shift).
  const uint32_t fexp = static_cast<uint32_t>(127 - 14 - shift);
  return bitsToFloat(sign | (fexp << 23) | ((mant & 0x3ffu) << 13));
}

// Round to nearest, ties to even; overflow gives infinity. A NaN stays NaN: quiet, same sign, the
// top 9 payload bits kept (as VCVTPS2PH does).
inline uint16_t floatToHalfImpl(float f) {
  const uint32_t u = floatBits(f);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t x = u & 0x7fffffffu;
  if (x > 0x7f800000u) {  // NaN
    return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  }
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (x >= 0x38800000u) {  // >= 2^-14: normal half (may round up to the next binade)
    const uint32_t odd = (x >> 13) & 1u;
    return static_cast<uint16_t>(sign | ((x - 0x38000000u + 0xfffu + odd) >> 13));
  }
  // Result is subnormal or zero: the value is x * 2^24 rounded to an integer.
  const uint32_t exp = x >> 23;
  if (exp < 102) return sign;  // < 2^-25: rounds to zero (covers float subnormals)
  const uint32_t m = (x & 0x7fffffu) | 0x800000u;  // value = m * 2^(exp - 150)
  const uint32_t s = 126 - exp;                    // value * 2^24 = m >> s, s in [14, 24]
  uint32_t q = m >> s;
  const uint32_t rem = m & ((1u << s) - 1);
  const uint32_t half = 1u << (s - 1);
  if (rem > half || (rem == half && (q & 1u) != 0)) ++q;
  return static_cast<uint16_t>(sign | q);
}

// Exact (a NaN stays the same NaN, signalling or not).
inline float bfloat16ToFloatImpl(uint16_t b) { return bitsToFloat(static_cast<uint32_t>(b) << 16); }

// Round to nearest, ties to even; overflow gives infinity. A NaN stays NaN: quiet, same sign, the
// top 6 payload bits kept.
inline uint16_t floatToBfloat16Impl(float f) {
  const uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace
}  // namespace chorus::reduce
