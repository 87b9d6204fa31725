// Wire-format kernels (reduce/wire.h), included by reduce/kernels.h into each per-ISA TU with
// the same rules: internal linkage, the same operations per element in every variant, so that
// scalar, AVX2 and AVX-512 give the same bits.
#pragma once

#include "reduce/wire.h"

#ifndef CHORUS_REDUCE_VBYTES
#error "include reduce/kernels.h, not reduce/wire_kernels.h"
#endif

namespace chorus::reduce {
namespace {

using F32IO = PlainIO<VF32, float>;

// 16-bit formats: vectors of kLanes values through the IO types of kernels.h; the tail goes
// through zero-padded buffers and the same vector code (as reduceKernel does).
template <class IO>
void encode16Kernel(void* wire, const float* src, size_t count) {
  auto* w = static_cast<unsigned char*>(wire);
  const auto* s = reinterpret_cast<const unsigned char*>(src);
  constexpr size_t kLanes = IO::kLanes;
  size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) IO::store(w + 2 * i, F32IO::load(s + 4 * i));
  if constexpr (kLanes > 1) {
    if (i < count) {
      alignas(64) unsigned char ts[kLanes * 4] = {};
      alignas(64) unsigned char tw[kLanes * 2];
      __builtin_memcpy(ts, s + 4 * i, (count - i) * 4);
      IO::store(tw, F32IO::load(ts));
      __builtin_memcpy(w + 2 * i, tw, (count - i) * 2);
    }
  }
}

template <class IO>
void decode16Kernel(float* dst, const void* wire, size_t count) {
  auto* d = reinterpret_cast<unsigned char*>(dst);
  const auto* w = static_cast<const unsigned char*>(wire);
  constexpr size_t kLanes = IO::kLanes;
  size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) F32IO::store(d + 4 * i, IO::load(w + 2 * i));
  if constexpr (kLanes > 1) {
    if (i < count) {
      alignas(64) unsigned char tw[kLanes * 2] = {};
      alignas(64) unsigned char td[kLanes * 4];
      __builtin_memcpy(tw, w + 2 * i, (count - i) * 2);
      F32IO::store(td, IO::load(tw));
      __builtin_memcpy(d + 4 * i, td, (count - i) * 4);
    }
  }
}

template <class IO>
void decodeAdd16Kernel(float* dst, const float* mine, const void* wire, size_t count) {
  auto* d = reinterpret_cast<unsigned char*>(dst);
  const auto* m = reinterpret_cast<const unsigned char*>(mine);
  const auto* w = static_cast<const unsigned char*>(wire);
  constexpr size_t kLanes = IO::kLanes;
  size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    F32IO::store(d + 4 * i, FSum<F32Lanes>::apply(F32IO::load(m + 4 * i), IO::load(w + 2 * i)));
  }
  if constexpr (kLanes > 1) {
    if (i < count) {
      alignas(64) unsigned char tm[kLanes * 4] = {};
      alignas(64) unsigned char tw[kLanes * 2] = {};
      alignas(64) unsigned char td[kLanes * 4];
      __builtin_memcpy(tm, m + 4 * i, (count - i) * 4);
      __builtin_memcpy(tw, w + 2 * i, (count - i) * 2);
      F32IO::store(td, FSum<F32Lanes>::apply(F32IO::load(tm), IO::load(tw)));
      __builtin_memcpy(d + 4 * i, td, (count - i) * 4);
    }
  }
}

// ---- int8 blocks: plain loops over at most kWireBlock values, which the compiler vectorises
// for each TU's instruction set without changing a value (no reassociation, no contraction).

constexpr size_t kInt8Block = 256;
static_assert(kInt8Block == kWireBlock);

inline float blockScale(const float* x, size_t n) {
  uint32_t top = 0;  // largest |x| as bits: for non-NaN floats the bit order is the value order
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    __builtin_memcpy(&u, x + i, 4);
    u &= 0x7fffffffu;
    top = u > top ? u : top;
  }
  float m;
  __builtin_memcpy(&m, &top, 4);
  return m / 127.0f;
}

inline void int8EncodeKernel(void* wire, const float* src, size_t count) {
  const size_t blocks = (count + kInt8Block - 1) / kInt8Block;
  auto* scales = static_cast<unsigned char*>(wire);
  auto* q = reinterpret_cast<int8_t*>(scales + 4 * blocks);
  for (size_t b = 0; b < blocks; ++b) {
    const float* x = src + b * kInt8Block;
    int8_t* out = q + b * kInt8Block;
    const size_t n = count - b * kInt8Block < kInt8Block ? count - b * kInt8Block : kInt8Block;
    const float scale = blockScale(x, n);
    __builtin_memcpy(scales + 4 * b, &scale, 4);
    if (!(scale > 0.0f)) {  // zeros (or a NaN scale): nothing to say but 0
      for (size_t i = 0; i < n; ++i) out[i] = 0;
      continue;
    }
    // (y + 1.5 * 2^23) - 1.5 * 2^23 rounds |y| <= 2^22 to the nearest integer, ties to even.
    constexpr float kRound = 12582912.0f;
    for (size_t i = 0; i < n; ++i) {
      float y = x[i] / scale;
      y = (y + kRound) - kRound;
      y = y > 127.0f ? 127.0f : y;
      y = y < -127.0f ? -127.0f : y;
      out[i] = static_cast<int8_t>(static_cast<int32_t>(y));
    }
  }
}

// dst = (mine +) q * scale per value.
template <bool kAdd>
void int8DecodeKernel(float* dst, const float* mine, const void* wire, size_t count) {
  const size_t blocks = (count + kInt8Block - 1) / kInt8Block;
  const auto* scales = static_cast<const unsigned char*>(wire);
  const auto* q = reinterpret_cast<const int8_t*>(scales + 4 * blocks);
  for (size_t b = 0; b < blocks; ++b) {
    float scale;
    __builtin_memcpy(&scale, scales + 4 * b, 4);
    const size_t base = b * kInt8Block;
    const size_t n = count - base < kInt8Block ? count - base : kInt8Block;
    for (size_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(q[base + i]) * scale;
      if constexpr (kAdd) {
        dst[base + i] = mine[base + i] + v;
      } else {
        dst[base + i] = v;
      }
    }
  }
}

inline void int8DecodeKernelPlain(float* dst, const void* wire, size_t count) {
  int8DecodeKernel<false>(dst, nullptr, wire, count);
}

inline void fillWireKernels(KernelTable& table) {
  WireKernels& bf = table.wire[static_cast<int>(WireFormat::kBf16)];
  bf = {&encode16Kernel<Bf16IO>, &decode16Kernel<Bf16IO>, &decodeAdd16Kernel<Bf16IO>};
  WireKernels& fp = table.wire[static_cast<int>(WireFormat::kFp16)];
  fp = {&encode16Kernel<HalfIO>, &decode16Kernel<HalfIO>, &decodeAdd16Kernel<HalfIO>};
  WireKernels& i8 = table.wire[static_cast<int>(WireFormat::kInt8Block)];
  i8 = {&int8EncodeKernel, &int8DecodeKernelPlain, &int8DecodeKernel<true>};
}

}  // namespace
}  // namespace chorus::reduce
