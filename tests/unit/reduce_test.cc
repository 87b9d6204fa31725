// Reduction kernels: every dtype x op x ISA variant available on this CPU against an independent
// reference written here (not the library's scalar table), bit for bit. This file: random data,
// every fp16 / bf16 pattern, divide, and the table of kernels; hand-picked literal cases in
// reduce_cases_test.cc, the conversions in reduce_convert_test.cc; the reference in
// reduce_reference.h, the checking in reduce_check.h.
#include "reduce/reduce.h"
#include "unit/reduce_check.h"
#include "unit/reduce_reference.h"

#include <gtest/gtest.h>
#include <chorus/error.hpp>
#include <chorus/types.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace chorus::reduce::kerneltest {
namespace {

// ---- Per-dtype test traits ------------------------------------------------------------------

using Rng = std::mt19937_64;

template <class T>
T randomBits(Rng& rng) {
  const uint64_t v = rng();
  T t;
  std::memcpy(&t, &v, sizeof t);
  return t;
}

template <class T>
T pick(Rng& rng, const std::vector<T>& pool) {
  return pool[rng() % pool.size()];
}

template <DataType D>
struct Traits;

template <>
struct Traits<DataType::kF32> {
  using T = float;
  static T op(ReduceOp op, T a, T b) { return refFloatOp(op, a, b); }
  static T div(T x, int d) { return std::isnan(x) ? refQuiet(x) : x / static_cast<float>(d); }
  static T gen(Rng& rng) {
    static const std::vector<uint32_t> specials = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
        0xffc12345u, 0x7f800001u, 0x7fa00000u, 0x00000001u, 0x807fffffu,
        0x7f7fffffu, 0xff7fffffu, 0x3f800000u, 0xbf800000u, 0x00800000u};
    switch (rng() % 8) {
      case 0:
        return randomBits<T>(rng);
      case 1:
        return std::bit_cast<T>(pick(rng, specials));
      default:
        return static_cast<T>(std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng),
                                         static_cast<int>(rng() % 40) - 20));
    }
  }
};

template <>
struct Traits<DataType::kF64> {
  using T = double;
  static T op(ReduceOp op, T a, T b) { return refFloatOp(op, a, b); }
  static T div(T x, int d) { return std::isnan(x) ? refQuiet(x) : x / static_cast<double>(d); }
  static T gen(Rng& rng) {
    static const std::vector<uint64_t> specials = {0,
                                                   0x8000000000000000ull,
                                                   0x7ff0000000000000ull,
                                                   0xfff0000000000000ull,
                                                   0x7ff8000000000000ull,
                                                   0xfff8000000012345ull,
                                                   0x7ff0000000000001ull,
                                                   0x7ff4000000000000ull,
                                                   1,
                                                   0x800fffffffffffffull,
                                                   0x7fefffffffffffffull,
                                                   0x3ff0000000000000ull,
                                                   0xbff0000000000000ull};
    switch (rng() % 8) {
      case 0:
        return randomBits<T>(rng);
      case 1:
        return std::bit_cast<T>(pick(rng, specials));
      default:
        return std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng),
                          static_cast<int>(rng() % 80) - 40);
    }
  }
};

template <>
struct Traits<DataType::kF16> {
  using T = uint16_t;
  static T op(ReduceOp op, T a, T b) {
    return refFloatToHalf(refFloatOp(op, refHalfToFloat(a), refHalfToFloat(b)));
  }
  static T div(T x, int d) {
    return refFloatToHalf(Traits<DataType::kF32>::div(refHalfToFloat(x), d));
  }
  static T gen(Rng& rng) {
    if (rng() % 2 == 0) return randomBits<T>(rng);
    return refFloatToHalf(static_cast<float>(std::ldexp(
        std::uniform_real_distribution<double>(-1, 1)(rng), static_cast<int>(rng() % 36) - 26)));
  }
};

template <>
struct Traits<DataType::kBF16> {
  using T = uint16_t;
  static T op(ReduceOp op, T a, T b) {
    return refFloatToBf16(refFloatOp(op, refBf16ToFloat(a), refBf16ToFloat(b)));
  }
  static T div(T x, int d) {
    return refFloatToBf16(Traits<DataType::kF32>::div(refBf16ToFloat(x), d));
  }
  static T gen(Rng& rng) {
    if (rng() % 2 == 0) return randomBits<T>(rng);
    return refFloatToBf16(static_cast<float>(std::ldexp(
        std::uniform_real_distribution<double>(-1, 1)(rng), static_cast<int>(rng() % 40) - 20)));
  }
};

template <class Int>
struct IntTraits {
  using T = Int;
  static T op(ReduceOp op, T a, T b) { return refIntOp(op, a, b); }
  // C division of the promoted values, truncating toward zero, wrapped back to T.
  static T div(T x, int d) {
    if (d == -1) return static_cast<T>(0 - static_cast<uint64_t>(static_cast<int64_t>(x)));
    return static_cast<T>(static_cast<int64_t>(x) / static_cast<int64_t>(d));
  }
  static T gen(Rng& rng) {
    static const std::vector<T> specials = {std::numeric_limits<T>::min(),
                                            std::numeric_limits<T>::max(),
                                            0,
                                            1,
                                            static_cast<T>(-1),
                                            2,
                                            static_cast<T>(std::numeric_limits<T>::max() - 1)};
    if (rng() % 4 == 0) return pick(rng, specials);
    return randomBits<T>(rng);
  }
};

template <>
struct Traits<DataType::kI8> : IntTraits<int8_t> {};
template <>
struct Traits<DataType::kU8> : IntTraits<uint8_t> {};
template <>
struct Traits<DataType::kI32> : IntTraits<int32_t> {};
template <>
struct Traits<DataType::kI64> : IntTraits<int64_t> {};
constexpr DataType kAllTypes[] = {DataType::kF32, DataType::kF64, DataType::kF16, DataType::kBF16,
                                  DataType::kI8,  DataType::kU8,  DataType::kI32, DataType::kI64};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProd, ReduceOp::kMin,
                                ReduceOp::kMax};

// ---- Random data, every dtype x op x ISA x awkward count --------------------------------------

constexpr size_t kCounts[] = {0, 1, 7, 15, 16, 17, 33, 63, 64, 65, 1000003};

// One random data set per dtype (the same a, b for every op); avg must give the sum's result.
template <DataType D>
void checkRandomAllOps(const std::vector<std::string>& isas) {
  using Tr = Traits<D>;
  using T = typename Tr::T;
  constexpr size_t kMax = 1000003;
  Rng rng(1234 + static_cast<int>(D));
  std::vector<T> a(kMax), b(kMax), expect(kMax);
  for (size_t i = 0; i < kMax; ++i) {
    a[i] = Tr::gen(rng);
    b[i] = Tr::gen(rng);
  }
  for (ReduceOp op : kAllOps) {
    if (op != ReduceOp::kAvg) {  // kAvg follows kSum in kAllOps and expects the same
      for (size_t i = 0; i < kMax; ++i) expect[i] = Tr::op(op, a[i], b[i]);
    }
    for (const std::string& isa : isas) {
      ASSERT_TRUE(setIsaForTesting(isa));
      ASSERT_EQ(isaName(), isa);
      const ReduceFn fn = reduceFn(D, op);
      ASSERT_NE(fn, nullptr);
      const std::string what =
          isa + " " + std::string(toString(D)) + " " + std::string(toString(op));
      for (size_t count : kCounts) {
        checkReduce(fn, a, b, expect, count, what);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

TEST_F(ReduceTest, RandomF32) { checkRandomAllOps<DataType::kF32>(isas_); }
TEST_F(ReduceTest, RandomF64) { checkRandomAllOps<DataType::kF64>(isas_); }
TEST_F(ReduceTest, RandomF16) { checkRandomAllOps<DataType::kF16>(isas_); }
TEST_F(ReduceTest, RandomBF16) { checkRandomAllOps<DataType::kBF16>(isas_); }
TEST_F(ReduceTest, RandomI8) { checkRandomAllOps<DataType::kI8>(isas_); }
TEST_F(ReduceTest, RandomU8) { checkRandomAllOps<DataType::kU8>(isas_); }
TEST_F(ReduceTest, RandomI32) { checkRandomAllOps<DataType::kI32>(isas_); }
TEST_F(ReduceTest, RandomI64) { checkRandomAllOps<DataType::kI64>(isas_); }

// Every fp16 / bf16 bit pattern as a against several permutations as b.
template <DataType D>
void checkExhaustive16(const std::vector<std::string>& isas) {
  using Tr = Traits<D>;
  constexpr size_t kN = 65536;
  std::vector<uint16_t> a(kN);
  for (size_t i = 0; i < kN; ++i) a[i] = static_cast<uint16_t>(i);
  for (uint32_t mult : {1u, 40503u, 65535u}) {
    for (uint32_t add : {0u, 0x3c00u, 0x8001u}) {
      std::vector<uint16_t> b(kN);
      for (size_t i = 0; i < kN; ++i) b[i] = static_cast<uint16_t>(i * mult + add);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
        std::vector<uint16_t> expect(kN);
        for (size_t i = 0; i < kN; ++i) expect[i] = Tr::op(op, a[i], b[i]);
        for (const std::string& isa : isas) {
          ASSERT_TRUE(setIsaForTesting(isa));
          checkReduce(reduceFn(D, op), a, b, expect, kN,
                      isa + " " + std::string(toString(D)) + " " + std::string(toString(op)) +
                          " mult=" + std::to_string(mult) + " add=" + std::to_string(add));
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
}

TEST_F(ReduceTest, ExhaustiveF16) { checkExhaustive16<DataType::kF16>(isas_); }
TEST_F(ReduceTest, ExhaustiveBF16) { checkExhaustive16<DataType::kBF16>(isas_); }
// ---- divide -------------------------------------------------------------------------------------

template <DataType D>
void checkDivide(const std::vector<std::string>& isas) {
  using Tr = Traits<D>;
  using T = typename Tr::T;
  Rng rng(99 + static_cast<int>(D));
  constexpr size_t kMax = 1003;
  std::vector<T> x(kMax);
  for (T& v : x) v = Tr::gen(rng);
  for (int divisor : {1, 2, 3, 7, -1, -3, 64, 1000}) {
    std::vector<T> expect(kMax);
    for (size_t i = 0; i < kMax; ++i) expect[i] = Tr::div(x[i], divisor);
    for (const std::string& isa : isas) {
      ASSERT_TRUE(setIsaForTesting(isa));
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{17}, size_t{65}, kMax}) {
        Buffer buf(scratch(0), x.data(), count * sizeof(T), 1);
        divide(buf.data(), count, D, divisor);
        EXPECT_TRUE(buf.guardsIntact());
        for (size_t i = 0; i < count; ++i) {
          const T got = loadAt<T>(buf.data(), i);
          if (std::memcmp(&got, &expect[i], sizeof(T)) != 0) {
            ADD_FAILURE() << isa << " divide " << toString(D) << " by " << divisor << " count "
                          << count << " at " << i << ": x=" << hex(x[i])
                          << " expected=" << hex(expect[i]) << " got=" << hex(got);
            return;
          }
        }
      }
    }
  }
}

TEST_F(ReduceTest, DivideAllTypes) {
  checkDivide<DataType::kF32>(isas_);
  checkDivide<DataType::kF64>(isas_);
  checkDivide<DataType::kF16>(isas_);
  checkDivide<DataType::kBF16>(isas_);
  checkDivide<DataType::kI8>(isas_);
  checkDivide<DataType::kU8>(isas_);
  checkDivide<DataType::kI32>(isas_);
  checkDivide<DataType::kI64>(isas_);
}

TEST_F(ReduceTest, DivideLiterals) {
  for (const std::string& isa : isas_) {
    ASSERT_TRUE(setIsaForTesting(isa));
    std::vector<int32_t> i32 = {-7, 7, -1, 0, std::numeric_limits<int32_t>::min(), 9};
    divide(i32.data(), i32.size(), DataType::kI32, 2);
    EXPECT_EQ(i32, (std::vector<int32_t>{-3, 3, 0, 0, -1073741824, 4})) << isa;
    std::vector<int32_t> neg = {-7, 7, std::numeric_limits<int32_t>::min()};
    divide(neg.data(), neg.size(), DataType::kI32, -1);
    EXPECT_EQ(neg, (std::vector<int32_t>{7, -7, std::numeric_limits<int32_t>::min()})) << isa;
    std::vector<int8_t> i8 = {-128, -7, 127};
    divide(i8.data(), i8.size(), DataType::kI8, -1);
    EXPECT_EQ(i8, (std::vector<int8_t>{-128, 7, -127})) << isa;
    std::vector<int64_t> i64 = {std::numeric_limits<int64_t>::min(), -9};
    divide(i64.data(), i64.size(), DataType::kI64, -1);
    EXPECT_EQ(i64, (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 9})) << isa;
    std::vector<float> f32 = {1.0f, -7.0f, 3.0f};
    divide(f32.data(), f32.size(), DataType::kF32, 2);
    EXPECT_EQ(f32, (std::vector<float>{0.5f, -3.5f, 1.5f})) << isa;
    std::vector<uint16_t> f16 = {0x4200 /* 3 */, 0x3c00 /* 1 */};
    divide(f16.data(), f16.size(), DataType::kF16, 2);
    EXPECT_EQ(f16, (std::vector<uint16_t>{0x3e00, 0x3800})) << isa;
  }
}

TEST(ReduceApi, InvalidArguments) {
  float x = 1.0f;
  EXPECT_THROW(divide(&x, 1, DataType::kF32, 0), Error);
  EXPECT_THROW(divide(&x, 1, static_cast<DataType>(200), 2), Error);
  EXPECT_EQ(reduceFn(static_cast<DataType>(200), ReduceOp::kSum), nullptr);
  EXPECT_EQ(reduceFn(DataType::kF32, static_cast<ReduceOp>(200)), nullptr);
  EXPECT_FALSE(setIsaForTesting("sse9"));
}

TEST_F(ReduceTest, TableAndIsaSelection) {
  ASSERT_FALSE(isas_.empty());
  EXPECT_EQ(isas_.front(), "scalar");
  // The default is the widest variant this CPU supports.
  ASSERT_TRUE(setIsaForTesting(""));
  EXPECT_EQ(isaName(), isas_.back());
  std::cout << "[          ] reduce ISAs tested here: ";
  for (const auto& isa : isas_) std::cout << isa << ' ';
  std::cout << "(default " << isaName() << ")\n";
  for (const std::string& isa : isas_) {
    ASSERT_TRUE(setIsaForTesting(isa));
    EXPECT_EQ(isaName(), isa);
    for (DataType t : kAllTypes) {
      for (ReduceOp op : kAllOps) EXPECT_NE(reduceFn(t, op), nullptr) << isa;
      EXPECT_EQ(reduceFn(t, ReduceOp::kAvg), reduceFn(t, ReduceOp::kSum)) << isa;
    }
  }
}

}  // namespace
}  // namespace chorus::reduce::kerneltest
