// Reduction kernels on hand-picked cases checked against literal results: integer wrap-around,
// fp16 / bf16 rounding, NaNs and signed zeros (reduce_test.cc says what the kernels' tests cover).
#include "reduce/reduce.h"
#include "unit/reduce_check.h"
#include "unit/reduce_reference.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace chorus::reduce::kerneltest {
namespace {

// ---- Hand-picked cases, checked against literal results ---------------------------------------

template <class T>
struct Case {
  T a, b, expect;
};

// Repeats the cases to fill a buffer long enough for vector bodies and tails, then checks every
// ISA.
template <class T>
void checkCases(const std::vector<std::string>& isas, DataType type, ReduceOp op,
                const std::vector<Case<T>>& cases) {
  constexpr size_t kCount = 203;
  std::vector<T> a(kCount), b(kCount), expect(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    const Case<T>& c = cases[i % cases.size()];
    a[i] = c.a;
    b[i] = c.b;
    expect[i] = c.expect;
  }
  for (const std::string& isa : isas) {
    ASSERT_TRUE(setIsaForTesting(isa));
    for (size_t count : {kCount, cases.size()}) {
      checkReduce(reduceFn(type, op), a, b, expect, count,
                  isa + " " + std::string(toString(type)) + " " + std::string(toString(op)));
    }
  }
}

TEST_F(ReduceTest, IntegerWrap) {
  constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
  constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
  constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
  constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
  checkCases<int32_t>(isas_, DataType::kI32, ReduceOp::kSum,
                      {{kI32Max, 1, kI32Min}, {kI32Min, -1, kI32Max}, {kI32Max, kI32Max, -2}});
  checkCases<int32_t>(isas_, DataType::kI32, ReduceOp::kAvg, {{kI32Max, 1, kI32Min}});
  checkCases<int32_t>(isas_, DataType::kI32, ReduceOp::kProd,
                      {{65536, 65536, 0}, {kI32Max, 2, -2}, {kI32Min, -1, kI32Min}, {-3, 5, -15}});
  checkCases<int8_t>(isas_, DataType::kI8, ReduceOp::kSum,
                     {{127, 1, -128}, {-128, -1, 127}, {-100, -100, 56}});
  checkCases<int8_t>(isas_, DataType::kI8, ReduceOp::kProd,
                     {{-128, -1, -128}, {16, 16, 0}, {100, 3, 44}, {-7, 9, -63}, {127, 127, 1}});
  checkCases<uint8_t>(isas_, DataType::kU8, ReduceOp::kSum, {{255, 1, 0}, {200, 100, 44}});
  checkCases<uint8_t>(isas_, DataType::kU8, ReduceOp::kProd, {{200, 2, 144}, {255, 255, 1}});
  checkCases<int64_t>(isas_, DataType::kI64, ReduceOp::kSum,
                      {{kI64Max, 1, kI64Min}, {kI64Min, -1, kI64Max}});
  checkCases<int64_t>(isas_, DataType::kI64, ReduceOp::kProd,
                      {{int64_t{1} << 32, int64_t{1} << 32, 0},
                       {(int64_t{1} << 32) + 1, (int64_t{1} << 32) + 1, (int64_t{1} << 33) + 1},
                       {kI64Min, -1, kI64Min},
                       {-3, 0x123456789ll, -3 * 0x123456789ll},
                       {kI64Max, kI64Max, 1}});
  checkCases<int8_t>(isas_, DataType::kI8, ReduceOp::kMin, {{-128, 127, -128}, {5, -5, -5}});
  checkCases<uint8_t>(isas_, DataType::kU8, ReduceOp::kMax, {{200, 100, 200}, {0, 255, 255}});
  checkCases<int64_t>(isas_, DataType::kI64, ReduceOp::kMin,
                      {{kI64Min, kI64Max, kI64Min}, {-1, 1, -1}});
  checkCases<int64_t>(isas_, DataType::kI64, ReduceOp::kMax,
                      {{kI64Min, kI64Max, kI64Max}, {-1, 1, 1}});
}

TEST_F(ReduceTest, HalfRounding) {
  checkCases<uint16_t>(isas_, DataType::kF16, ReduceOp::kSum,
                       {
                           {0x3c00, 0x1000, 0x3c00},  // 1 + 2^-11: tie, stays even
                           {0x3c01, 0x1000, 0x3c02},  // tie, rounds up to even
                           {0x3c00, 0x1001, 0x3c01},  // just above the tie
                           {0x7bff, 0x7bff, 0x7c00},  // overflow to inf
                           {0x7bff, 0x4c00, 0x7c00},  // 65504 + 16 = 65520: tie to inf
                           {0x7bff, 0x4800, 0x7bff},  // 65504 + 8: below the tie
                           {0xfbff, 0xfbff, 0xfc00},  // -inf
                           {0x0001, 0x0001, 0x0002},  // subnormals
                           {0x0400, 0x83ff, 0x0001},  // normal - subnormal
                           {0x03ff, 0x0001, 0x0400},  // subnormal to normal
                           {0x3c00, 0xbc00, 0x0000},  // 1 - 1 = +0
                           {0x8000, 0x8000, 0x8000},  // -0 + -0
                           {0x7c00, 0xfc00, 0xfe00},  // inf - inf: default NaN
                           {0x7c01, 0x3c00, 0x7e01},  // sNaN a: quieted
                           {0x3c00, 0xfd23, 0xff23},  // sNaN b: quieted
                           {0x7e05, 0x7e06, 0x7e05},  // both NaN: a
                       });
  checkCases<uint16_t>(isas_, DataType::kF16, ReduceOp::kProd,
                       {
                           {0x0001, 0x3800, 0x0000},  // 2^-24 * 0.5: tie to 0
                           {0x0003, 0x3800, 0x0002},  // 1.5 * 2^-24: tie to 2
                           {0x0001, 0xb800, 0x8000},  // -0
                           {0x5c00, 0x5c00, 0x7c00},  // 256^2 overflows
                           {0x0000, 0x7c00, 0xfe00},  // 0 * inf: default NaN
                       });
  checkCases<uint16_t>(isas_, DataType::kBF16, ReduceOp::kSum,
                       {
                           {0x3f80, 0x3b80, 0x3f80},  // 1 + 2^-8: tie, stays even
                           {0x3f81, 0x3b80, 0x3f82},  // tie, rounds up to even
                           {0x7f7f, 0x7f7f, 0x7f80},  // overflow to inf
                           {0x0001, 0x0001, 0x0002},  // subnormals
                           {0x0080, 0x807f, 0x0001},  // normal - subnormal
                           {0x7f80, 0xff80, 0xffc0},  // inf - inf: default NaN
                           {0x7f81, 0x3f80, 0x7fc1},  // sNaN a: quieted
                           {0x3f80, 0xff82, 0xffc2},  // sNaN b: quieted
                       });
  checkCases<uint16_t>(
      isas_, DataType::kBF16, ReduceOp::kMin,
      {{0x7f81, 0x3f80, 0x7fc1}, {0x3f80, 0x7fc5, 0x7fc5}, {0x8000, 0x0000, 0x8000}});
}

TEST_F(ReduceTest, FloatNan) {
  auto f = [](uint32_t bits) { return std::bit_cast<float>(bits); };
  const float one = 1.0f;
  checkCases<float>(isas_, DataType::kF32, ReduceOp::kSum,
                    {
                        {f(0x7fc00001), one, f(0x7fc00001)},
                        {one, f(0xffc00002), f(0xffc00002)},
                        {f(0x7f800001), f(0x7fc00002), f(0x7fc00001)},  // both NaN: quiet(a)
                        {f(0x7fc00002), f(0x7f800001), f(0x7fc00002)},
                        {f(0x7f800000), f(0xff800000), f(0xffc00000)},  // inf - inf
                        {one, one, 2.0f},
                    });
  checkCases<float>(isas_, DataType::kF32, ReduceOp::kProd,
                    {{0.0f, f(0x7f800000), f(0xffc00000)}, {one, f(0x7f800005), f(0x7fc00005)}});
  checkCases<float>(isas_, DataType::kF32, ReduceOp::kMin,
                    {
                        {f(0x7f800001), one, f(0x7f800001)},  // NaN a, kept exactly
                        {one, f(0xffc00002), f(0xffc00002)},  // NaN b
                        {f(0x7fc00001), f(0x7fc00002), f(0x7fc00002)},
                        {-0.0f, 0.0f, -0.0f},
                        {0.0f, -0.0f, 0.0f},
                        {f(0xff800000), one, f(0xff800000)},
                        {2.0f, one, one},
                    });
  checkCases<float>(isas_, DataType::kF32, ReduceOp::kMax,
                    {
                        {f(0x7fc00001), one, f(0x7fc00001)},
                        {one, f(0x7fc00003), f(0x7fc00003)},
                        {-0.0f, 0.0f, -0.0f},
                        {0.0f, -0.0f, 0.0f},
                        {2.0f, one, 2.0f},
                    });
  auto d = [](uint64_t bits) { return std::bit_cast<double>(bits); };
  checkCases<double>(
      isas_, DataType::kF64, ReduceOp::kSum,
      {{d(0x7ff0000000000001ull), 1.0, d(0x7ff8000000000001ull)},
       {d(0x7ff0000000000000ull), d(0xfff0000000000000ull), d(0xfff8000000000000ull)}});
  checkCases<double>(isas_, DataType::kF64, ReduceOp::kMax,
                     {{1.0, d(0x7ff0000000000001ull), d(0x7ff0000000000001ull)},
                      {d(0xfff8000000000007ull), 1.0, d(0xfff8000000000007ull)},
                      {-1.0, 1.0, 1.0}});
  checkCases<uint16_t>(
      isas_, DataType::kF16, ReduceOp::kMax,
      {{0x7d00, 0x3c00, 0x7f00}, {0x3c00, 0xfe05, 0xfe05}, {0x3c00, 0x4000, 0x4000}});
}
}  // namespace
}  // namespace chorus::reduce::kerneltest
