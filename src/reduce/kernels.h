// Reduction kernel bodies shared by kernels_scalar.cc, kernels_avx2.cc and kernels_avx512.cc.
//
// Each of those TUs defines CHORUS_REDUCE_VBYTES (0 for plain scalar code, 32 for AVX2, 64 for
// AVX-512) and includes this header once. The loops are written once with GCC vector extensions
// (plain scalars when CHORUS_REDUCE_VBYTES is 0), so every variant performs the same operations
// per element and gives bit-identical results. Everything here has internal linkage (anonymous
// namespace) and uses no std:: templates: an AVX-512 copy of an inline function can never be
// chosen by the linker for code that runs on a CPU without AVX-512.
//
// Semantics (the contract of reduce.h), per element:
//  - integers: sum and product in the unsigned type (two's-complement wrap, no UB); min/max in
//    the signed (or unsigned, for u8) type.
//  - f32/f64: one IEEE add or multiply in that type. fp16/bf16: both operands converted to float
//    (exactly), combined in float, rounded once to nearest-even.
//  - NaN results are made deterministic, independent of which operand order the compiler picks
//    for the commutative add/mul: sum/prod return quiet(a) if a is NaN, else quiet(b) if b is
//    NaN, else the hardware's default NaN (x86: negative quiet NaN) for inf-inf or 0*inf.
//  - min(a, b) = (isnan(b) || b < a) ? b : a, max(a, b) = (isnan(b) || b > a) ? b : a: NaN if
//    either operand is NaN (the payload of b if both are), and a when a and b compare equal
//    (so min(-0, +0) = -0 and min(+0, -0) = +0).
//  - fp16 NaN operands are quieted by the conversion to float (as F16C does); bf16 NaNs convert
//    exactly and are quieted when rounded back. All payload bits that fit are kept.
#pragma once

#ifndef CHORUS_REDUCE_VBYTES
#error "define CHORUS_REDUCE_VBYTES (0, 32 or 64) before including reduce/kernels.h"
#endif

#include "reduce/half.h"
#include "reduce/kernel_table.h"

#include <chorus/types.hpp>

#include <cstddef>
#include <cstdint>

#if CHORUS_REDUCE_VBYTES > 0
#include <immintrin.h>
#endif

namespace chorus::reduce {
namespace {

inline constexpr size_t kVectorBytes = CHORUS_REDUCE_VBYTES;

#if CHORUS_REDUCE_VBYTES == 0
using VF32 = float;
using VF64 = double;
using VU8 = uint8_t;
using VI8 = int8_t;
using VU32 = uint32_t;
using VI32 = int32_t;
using VU64 = uint64_t;
using VI64 = int64_t;
#else
typedef float VF32 __attribute__((vector_size(CHORUS_REDUCE_VBYTES)));
typedef double VF64 __attribute__((vector_size(CHORUS_REDUCE_VBYTES)));
typedef uint8_t VU8 __attribute__((vector_size(CHORUS_REDUCE_VBYTES)));
typedef int8_t VI8 __attribute__((vector_size(CHORUS_REDUCE_VBYTES)));
typedef uint32_t VU32 __attribute__((vector_size(CHORUS_REDUCE_VBYTES)));
typedef int32_t VI32 __attribute__((vector_size(CHORUS_REDUCE_VBYTES)));
typedef uint64_t VU64 __attribute__((vector_size(CHORUS_REDUCE_VBYTES)));
typedef int64_t VI64 __attribute__((vector_size(CHORUS_REDUCE_VBYTES)));
#endif

template <class To, class From>
inline To bitCast(const From& from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  __builtin_memcpy(&to, &from, sizeof to);
  return to;
}

template <class V>
inline V loadBytes(const unsigned char* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

template <class V>
inline void storeBytes(unsigned char* p, const V& v) {
  __builtin_memcpy(p, &v, sizeof v);
}

// Every lane set to s.
template <class V, class S>
inline V splat(S s) {
  if constexpr (kVectorBytes == 0) {
    return static_cast<V>(s);
  } else {
    V v = {};
    for (size_t k = 0; k < sizeof(V) / sizeof(S); ++k) v[k] = s;
    return v;
  }
}

// True if any lane of a float or double vector is NaN.
template <class V>
inline bool anyNan(V r) {
#if CHORUS_REDUCE_VBYTES == 0
  return r != r;
#elif CHORUS_REDUCE_VBYTES == 32
  if constexpr (sizeof(r[0]) == 4) {
    return _mm256_movemask_ps(
               _mm256_cmp_ps(bitCast<__m256>(r), bitCast<__m256>(r), _CMP_UNORD_Q)) != 0;
  } else {
    return _mm256_movemask_pd(
               _mm256_cmp_pd(bitCast<__m256d>(r), bitCast<__m256d>(r), _CMP_UNORD_Q)) != 0;
  }
#else
  if constexpr (sizeof(r[0]) == 4) {
    return _mm512_cmp_ps_mask(bitCast<__m512>(r), bitCast<__m512>(r), _CMP_UNORD_Q) != 0;
  } else {
    return _mm512_cmp_pd_mask(bitCast<__m512d>(r), bitCast<__m512d>(r), _CMP_UNORD_Q) != 0;
  }
#endif
}

// ---- Floating-point lanes and operations ------------------------------------------------------

struct F32Lanes {
  using V = VF32;
  using U = VU32;
  static constexpr uint32_t kQuietBit = 0x00400000u;
};
struct F64Lanes {
  using V = VF64;
  using U = VU64;
  static constexpr uint64_t kQuietBit = 0x0008000000000000ull;
};

template <class F>
inline typename F::V quiet(typename F::V x) {
  using U = typename F::U;
  return bitCast<typename F::V>(static_cast<U>(bitCast<U>(x) | F::kQuietBit));
}

// r = a op b is NaN: make the NaN independent of the operand order the compiler used.
template <class F>
[[gnu::noinline, gnu::cold]] typename F::V fixNan(typename F::V r, typename F::V a,
                                                  typename F::V b) {
  r = (b != b) ? quiet<F>(b) : r;
  r = (a != a) ? quiet<F>(a) : r;
  return r;
}

template <class F>
struct FSum {
  using V = typename F::V;
  static V apply(V a, V b) {
    V r = a + b;
    if (anyNan(r)) [[unlikely]]
      r = fixNan<F>(r, a, b);
    return r;
  }
};

template <class F>
struct FProd {
  using V = typename F::V;
  static V apply(V a, V b) {
    V r = a * b;
    if (anyNan(r)) [[unlikely]]
      r = fixNan<F>(r, a, b);
    return r;
  }
};

template <class F>
struct FMin {
  using V = typename F::V;
  static V apply(V a, V b) { return ((b != b) | (b < a)) ? b : a; }
};

template <class F>
struct FMax {
  using V = typename F::V;
  static V apply(V a, V b) { return ((b != b) | (b > a)) ? b : a; }
};

// ---- Integer operations -----------------------------------------------------------------------

// V is an unsigned lane type for sum and product: wrapping, never UB.
template <class V>
struct ISum {
  static V apply(V a, V b) { return static_cast<V>(a + b); }
};
template <class V>
struct IProd {
  static V apply(V a, V b) { return static_cast<V>(a * b); }
};
template <class V>
struct IMin {
  static V apply(V a, V b) { return (b < a) ? b : a; }
};
template <class V>
struct IMax {
  static V apply(V a, V b) { return (b > a) ? b : a; }
};

// ---- Memory layouts: load kLanes elements into a V, store them back ---------------------------

template <class Vec, class Elem>
struct PlainIO {
  using V = Vec;
  static constexpr size_t kElemBytes = sizeof(Elem);
  static constexpr size_t kLanes = sizeof(V) / sizeof(Elem);
  static V load(const unsigned char* p) { return loadBytes<V>(p); }
  static void store(unsigned char* p, V v) { storeBytes(p, v); }
};

// IEEE binary16 in memory, float lanes in registers.
struct HalfIO {
  using V = VF32;
  static constexpr size_t kElemBytes = 2;
  static constexpr size_t kLanes = sizeof(V) / sizeof(float);
  static V load(const unsigned char* p) {
#if CHORUS_REDUCE_VBYTES == 0
    return halfToFloatImpl(loadBytes<uint16_t>(p));
#elif CHORUS_REDUCE_VBYTES == 32
    return bitCast<V>(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#else
    // The maskz forms with a full mask are the plain instructions; the unmasked intrinsics trip a
    // GCC 12 -Wmaybe-uninitialized false positive (_mm512_undefined_ps).
    return bitCast<V>(
        _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#endif
  }
  static void store(unsigned char* p, V v) {
#if CHORUS_REDUCE_VBYTES == 0
    storeBytes(p, floatToHalfImpl(v));
#elif CHORUS_REDUCE_VBYTES == 32
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(bitCast<__m256>(v), _MM_FROUND_TO_NEAREST_INT));
#else
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(p),
        _mm512_maskz_cvtps_ph(0xffff, bitCast<__m512>(v), _MM_FROUND_TO_NEAREST_INT));
#endif
  }
};

// bfloat16 in memory, float lanes in registers. Same rounding as floatToBfloat16Impl.
struct Bf16IO {
  using V = VF32;
  static constexpr size_t kElemBytes = 2;
  static constexpr size_t kLanes = sizeof(V) / sizeof(float);
  static V load(const unsigned char* p) {
#if CHORUS_REDUCE_VBYTES == 0
    return bfloat16ToFloatImpl(loadBytes<uint16_t>(p));
#else
#if CHORUS_REDUCE_VBYTES == 32
    const VU32 wide = bitCast<VU32>(_mm256_cvtepu16_epi32(loadBytes<__m128i>(p)));
#else
    const VU32 wide = bitCast<VU32>(_mm512_maskz_cvtepu16_epi32(0xffff, loadBytes<__m256i>(p)));
#endif
    return bitCast<V>(static_cast<VU32>(wide << 16));
#endif
  }
  static void store(unsigned char* p, V v) {
#if CHORUS_REDUCE_VBYTES == 0
    storeBytes(p, floatToBfloat16Impl(v));
#else
    const VU32 u = bitCast<VU32>(v);
    const VU32 rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const VU32 nan = (u >> 16) | 0x40u;
    const VU32 bits = (v != v) ? nan : rounded;
#if CHORUS_REDUCE_VBYTES == 32
    // Lanes hold values < 2^16, so the saturating pack is exact; it works per 128-bit half.
    const __m256i w = bitCast<__m256i>(bits);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(w, w), 0x08);
    storeBytes(p, _mm256_castsi256_si128(packed));
#else
    storeBytes(p, _mm512_maskz_cvtepi32_epi16(0xffff, bitCast<__m512i>(bits)));
#endif
#endif
  }
};

// ---- Loops ------------------------------------------------------------------------------------

// dst = a op b over count elements; dst may equal a or b. Reads and writes exactly count
// elements: the tail goes through a zero-padded buffer and the same vector code.
template <class IO, class Op>
void reduceKernel(void* dst, const void* a, const void* b, size_t count) {
  auto* pd = static_cast<unsigned char*>(dst);
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  constexpr size_t kStep = IO::kLanes * IO::kElemBytes;
  const size_t bytes = count * IO::kElemBytes;
  size_t i = 0;
  for (; i + 2 * kStep <= bytes; i += 2 * kStep) {
    const auto r0 = Op::apply(IO::load(pa + i), IO::load(pb + i));
    const auto r1 = Op::apply(IO::load(pa + i + kStep), IO::load(pb + i + kStep));
    IO::store(pd + i, r0);
    IO::store(pd + i + kStep, r1);
  }
  for (; i + kStep <= bytes; i += kStep)
    IO::store(pd + i, Op::apply(IO::load(pa + i), IO::load(pb + i)));
  if constexpr (IO::kLanes > 1) {
    if (i < bytes) {
      const size_t rest = bytes - i;
      alignas(64) unsigned char ta[kStep] = {};
      alignas(64) unsigned char tb[kStep] = {};
      alignas(64) unsigned char td[kStep];
      __builtin_memcpy(ta, pa + i, rest);
      __builtin_memcpy(tb, pb + i, rest);
      IO::store(td, Op::apply(IO::load(ta), IO::load(tb)));
      __builtin_memcpy(pd + i, td, rest);
    }
  }
}

// buf = buf / divisor for a floating type (x / divisor in float for fp16/bf16, then rounded).
template <class IO, class Scalar>
void floatDivideKernel(void* buf, size_t count, int divisor) {
  using V = typename IO::V;
  auto* p = static_cast<unsigned char*>(buf);
  const V d = splat<V>(static_cast<Scalar>(divisor));
  constexpr size_t kStep = IO::kLanes * IO::kElemBytes;
  const size_t bytes = count * IO::kElemBytes;
  size_t i = 0;
  for (; i + kStep <= bytes; i += kStep) IO::store(p + i, IO::load(p + i) / d);
  if constexpr (IO::kLanes > 1) {
    if (i < bytes) {
      const size_t rest = bytes - i;
      alignas(64) unsigned char t[kStep] = {};
      __builtin_memcpy(t, p + i, rest);
      IO::store(t, IO::load(t) / d);
      __builtin_memcpy(p + i, t, rest);
    }
  }
}

// buf = buf / divisor for an integer type: C division of the (promoted) values, truncating
// toward zero, result wrapped to the type. divisor == -1 is a wrapping negation (so INT_MIN / -1
// gives INT_MIN instead of trapping). Scalar in every variant: divide is not on the hot path.
template <class T, class U, class Wide>
void intDivideKernel(void* buf, size_t count, int divisor) {
  auto* p = static_cast<unsigned char*>(buf);
  if (divisor == -1) {
    for (size_t i = 0; i < count; ++i) {
      const auto x = loadBytes<U>(p + i * sizeof(T));
      storeBytes(p + i * sizeof(T), static_cast<U>(U{0} - x));
    }
    return;
  }
  const auto d = static_cast<Wide>(divisor);
  for (size_t i = 0; i < count; ++i) {
    const auto x = static_cast<Wide>(loadBytes<T>(p + i * sizeof(T)));
    storeBytes(p + i * sizeof(T), static_cast<T>(x / d));
  }
}

// ---- The table --------------------------------------------------------------------------------

inline void setRow(KernelTable& table, DataType type, ReduceFn sum, ReduceFn prod, ReduceFn min,
                   ReduceFn max, DivideFn divide) {
  ReduceFn* row = table.reduce[static_cast<int>(type)];
  row[static_cast<int>(ReduceOp::kSum)] = sum;
  row[static_cast<int>(ReduceOp::kProd)] = prod;
  row[static_cast<int>(ReduceOp::kMin)] = min;
  row[static_cast<int>(ReduceOp::kMax)] = max;
  row[static_cast<int>(ReduceOp::kAvg)] = sum;  // avg = sum, then divide()
  table.divide[static_cast<int>(type)] = divide;
}

template <class IO, class F>
inline void setFloatRow(KernelTable& table, DataType type, DivideFn divide) {
  setRow(table, type, &reduceKernel<IO, FSum<F>>, &reduceKernel<IO, FProd<F>>,
         &reduceKernel<IO, FMin<F>>, &reduceKernel<IO, FMax<F>>, divide);
}

// U: unsigned lanes for sum/prod, S: lanes of the element's own signedness for min/max.
template <class Elem, class U, class S, class UElem, class Wide>
inline void setIntRow(KernelTable& table, DataType type) {
  using UIO = PlainIO<U, Elem>;
  using SIO = PlainIO<S, Elem>;
  setRow(table, type, &reduceKernel<UIO, ISum<U>>, &reduceKernel<UIO, IProd<U>>,
         &reduceKernel<SIO, IMin<S>>, &reduceKernel<SIO, IMax<S>>,
         &intDivideKernel<Elem, UElem, Wide>);
}

inline void fillKernels(KernelTable& table) {
  using F32IO = PlainIO<VF32, float>;
  using F64IO = PlainIO<VF64, double>;
  setFloatRow<F32IO, F32Lanes>(table, DataType::kF32, &floatDivideKernel<F32IO, float>);
  setFloatRow<F64IO, F64Lanes>(table, DataType::kF64, &floatDivideKernel<F64IO, double>);
  setFloatRow<HalfIO, F32Lanes>(table, DataType::kF16, &floatDivideKernel<HalfIO, float>);
  setFloatRow<Bf16IO, F32Lanes>(table, DataType::kBF16, &floatDivideKernel<Bf16IO, float>);
  setIntRow<int8_t, VU8, VI8, uint8_t, int>(table, DataType::kI8);
  setIntRow<uint8_t, VU8, VU8, uint8_t, int>(table, DataType::kU8);
  setIntRow<int32_t, VU32, VI32, uint32_t, int64_t>(table, DataType::kI32);
  setIntRow<int64_t, VU64, VI64, uint64_t, int64_t>(table, DataType::kI64);
}

}  // namespace
}  // namespace chorus::reduce

#include "reduce/wire_kernels.h"
