// fp16 / bf16 <-> float conversions: every 16-bit pattern, and float to the narrow formats on a
// spread of floats and every rounding boundary, against the reference in reduce_reference.h.
#include "reduce/reduce.h"
#include "unit/reduce_check.h"
#include "unit/reduce_reference.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace chorus::reduce::kerneltest {
namespace {

// ---- Conversions ----------------------------------------------------------------------------

TEST(ReduceConvert, HalfAllPatterns) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = halfToFloat(h);
    ASSERT_EQ(std::bit_cast<uint32_t>(f), std::bit_cast<uint32_t>(refHalfToFloat(h))) << hex(h);
    const uint16_t back = floatToHalf(f);
    if (std::isnan(f)) {
      ASSERT_EQ(back, h | 0x200) << hex(h);  // quiet, payload kept
    } else {
      ASSERT_EQ(back, h) << hex(h);
    }
  }
}

TEST(ReduceConvert, Bfloat16AllPatterns) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto b = static_cast<uint16_t>(i);
    const float f = bfloat16ToFloat(b);
    ASSERT_EQ(std::bit_cast<uint32_t>(f), i << 16) << hex(b);
    ASSERT_EQ(std::bit_cast<uint32_t>(f), std::bit_cast<uint32_t>(refBf16ToFloat(b))) << hex(b);
    const uint16_t back = floatToBfloat16(f);
    if (std::isnan(f)) {
      ASSERT_EQ(back, b | 0x40) << hex(b);
    } else {
      ASSERT_EQ(back, b) << hex(b);
    }
  }
}

// float -> half / bf16 on a spread of floats plus every rounding boundary of the narrow format.
TEST(ReduceConvert, FromFloatMatchesReference) {
  std::vector<uint32_t> inputs;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 4093) inputs.push_back(static_cast<uint32_t>(u));
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // midpoints between consecutive halves, and neighbours
    const double lo = refHalfToFloat(static_cast<uint16_t>(h));
    const double hi = h + 1 == 0x7c00 ? 65536.0 : refHalfToFloat(static_cast<uint16_t>(h + 1));
    const auto mid = static_cast<float>((lo + hi) / 2);  // exact in float
    for (int64_t delta : {-1, 0, 1}) {
      const auto bits = static_cast<uint32_t>(std::bit_cast<uint32_t>(mid) + delta);
      inputs.push_back(bits);
      inputs.push_back(bits | 0x80000000u);
    }
  }
  for (uint32_t b = 0; b < 0x7f80; ++b) {  // bf16 midpoints are the float with low half 0x8000
    for (uint32_t low : {0x7fffu, 0x8000u, 0x8001u}) {
      inputs.push_back((b << 16) | low);
      inputs.push_back((b << 16) | low | 0x80000000u);
    }
  }
  for (uint32_t bits : inputs) {
    const float f = std::bit_cast<float>(bits);
    ASSERT_EQ(floatToHalf(f), refFloatToHalf(f)) << hex(bits);
    ASSERT_EQ(floatToBfloat16(f), refFloatToBf16(f)) << hex(bits);
  }
}
}  // namespace
}  // namespace chorus::reduce::kerneltest
