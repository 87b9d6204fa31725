// Reduction kernels: every dtype x op x ISA variant available on this CPU against an independent
// reference written here (not the library's scalar table), bit for bit.
#include "reduce/reduce.h"

#include <gtest/gtest.h>
#include <chorus/error.hpp>
#include <chorus/types.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

namespace chorus::reduce {
namespace {

// ---- Independent reference ------------------------------------------------------------------

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
float refHalfToFloat(uint16_t h) {
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
uint16_t refFloatToHalf(float f) {
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
float refBf16ToFloat(uint16_t b) {
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

uint16_t refFloatToBf16(float f) {
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

// ---- Helpers ----------------------------------------------------------------------------------

constexpr DataType kAllTypes[] = {DataType::kF32, DataType::kF64, DataType::kF16, DataType::kBF16,
                                  DataType::kI8,  DataType::kU8,  DataType::kI32, DataType::kI64};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProd, ReduceOp::kMin,
                                ReduceOp::kMax};

// The ISA variants this CPU can run (always includes "scalar").
std::vector<std::string> availableIsas() {
  std::vector<std::string> isas;
  for (const char* isa : {"scalar", "avx2", "avx512"}) {
    if (setIsaForTesting(isa)) isas.emplace_back(isa);
  }
  EXPECT_TRUE(setIsaForTesting(""));
  return isas;
}

template <class T>
std::string hex(T v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  std::ostringstream out;
  out << "0x" << std::hex << bits;
  return out.str();
}

template <class T>
T loadAt(const unsigned char* p, size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof v);
  return v;
}

constexpr unsigned char kGuard = 0xa5;
constexpr size_t kPad = 64;

// `size` bytes at a chosen (mis)alignment inside a reused scratch vector, guarded on both sides.
// (Reusing the storage keeps the 1M-element cases from spending their time in page faults.)
struct Buffer {
  Buffer(std::vector<unsigned char>& scratch, const void* src, size_t bytes, size_t offset)
      : storage(scratch), off(offset), size(bytes) {
    if (storage.size() < off + size + kPad) storage.resize(off + size + kPad);
    std::memset(storage.data(), kGuard, off);
    if (size > 0) std::memcpy(storage.data() + off, src, size);
    std::memset(storage.data() + off + size, kGuard, kPad);
  }
  unsigned char* data() { return storage.data() + off; }
  bool guardsIntact() const {
    for (size_t i = 0; i < off; ++i) {
      if (storage[i] != kGuard) return false;
    }
    for (size_t i = off + size; i < off + size + kPad; ++i) {
      if (storage[i] != kGuard) return false;
    }
    return true;
  }
  bool equals(const void* bytes) const {
    return size == 0 || std::memcmp(storage.data() + off, bytes, size) == 0;
  }
  std::vector<unsigned char>& storage;
  size_t off;
  size_t size;
};

std::vector<unsigned char>& scratch(int i) {
  static std::vector<unsigned char> buffers[3];
  return buffers[i];
}

// Runs fn on a[0..count), b[0..count) out of place, with dst == a and with dst == b, each with
// misaligned pointers, and checks the result against expect bit for bit, that nothing outside
// [0, count) of dst was written and that the inputs that are not dst are unchanged.
template <class T>
void checkReduce(ReduceFn fn, const std::vector<T>& a, const std::vector<T>& b,
                 const std::vector<T>& expect, size_t count, const std::string& what) {
  const size_t bytes = count * sizeof(T);
  enum Mode { kOutOfPlace, kIntoA, kIntoB };
  for (Mode mode : {kOutOfPlace, kIntoA, kIntoB}) {
    const std::string where = what + " count=" + std::to_string(count) + " " +
                              (mode == kOutOfPlace ? "out of place"
                               : mode == kIntoA    ? "dst==a"
                                                   : "dst==b");
    Buffer ba(scratch(0), a.data(), bytes, mode == kIntoA ? sizeof(T) : 1);
    Buffer bb(scratch(1), b.data(), bytes, mode == kIntoB ? 0 : 3);
    Buffer bd(scratch(2), a.data(), bytes, 5);
    if (bytes > 0) std::memset(bd.data(), 0, bytes);
    Buffer& out = mode == kOutOfPlace ? bd : mode == kIntoA ? ba : bb;
    fn(out.data(), ba.data(), bb.data(), count);
    const unsigned char* got = out.data();
    if (bytes > 0 && std::memcmp(got, expect.data(), bytes) != 0) {
      for (size_t i = 0; i < count; ++i) {
        if (std::memcmp(got + i * sizeof(T), &expect[i], sizeof(T)) != 0) {
          ADD_FAILURE() << where << ": first mismatch at " << i << ": a=" << hex(a[i])
                        << " b=" << hex(b[i]) << " expected=" << hex(expect[i])
                        << " got=" << hex(loadAt<T>(got, i));
          break;
        }
      }
      return;
    }
    EXPECT_TRUE(out.guardsIntact()) << where << ": wrote outside [0, count)";
    if (mode != kIntoA) {
      EXPECT_TRUE(ba.equals(a.data())) << where << ": a changed";
      EXPECT_TRUE(ba.guardsIntact()) << where;
    }
    if (mode != kIntoB) {
      EXPECT_TRUE(bb.equals(b.data())) << where << ": b changed";
      EXPECT_TRUE(bb.guardsIntact()) << where;
    }
  }
}

class ReduceTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_TRUE(setIsaForTesting("")); }
  const std::vector<std::string> isas_ = availableIsas();
};

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
}  // namespace chorus::reduce
