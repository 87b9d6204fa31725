// Independent reference for collective results: input generators chosen so that the exact
// result does not depend on the order of reduction, and a plain element-by-element reducer.
#pragma once

#include <chorus/types.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace chorus::testing {

using Buffer = std::vector<uint8_t>;

// Every element type and reduction the library offers.
inline constexpr DataType kTypes[] = {DataType::kF32,  DataType::kF64, DataType::kF16,
                                      DataType::kBF16, DataType::kI8,  DataType::kU8,
                                      DataType::kI32,  DataType::kI64};
inline constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                    ReduceOp::kAvg};

// Awkward counts for a world of n: empty, one, a prime, n + 1, a larger prime and n - 1.
inline std::vector<size_t> smallCounts(int n) {
  std::vector<size_t> c = {0, 1, 7, static_cast<size_t>(n) + 1, 1031};
  if (n > 1) c.push_back(static_cast<size_t>(n) - 1);
  return c;
}

// Round-to-nearest-even float -> bfloat16, written here independently of the library.
inline uint16_t refToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float refFromBf16(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Value of element i on `rank`, as a double for float types (exactly representable in every
// float type) or as raw bits for integers.
inline double floatInput(ReduceOp op, int rank, size_t i, uint32_t salt) {
  uint64_t h = mix((static_cast<uint64_t>(rank) << 40) ^ i ^ (uint64_t{salt} << 20));
  if (op == ReduceOp::kProd) {
    static const double choices[] = {1.0, -1.0, 2.0, 0.5};
    return choices[h % 4];
  }
  return static_cast<double>(static_cast<int>(h % 15) - 7);
}

template <class T>
void storeAs(uint8_t* p, double v) {
  T t = static_cast<T>(v);
  std::memcpy(p, &t, sizeof(T));
}

inline Buffer makeInput(DataType t, ReduceOp op, int rank, size_t count, uint32_t salt = 0) {
  const size_t es = sizeOf(t);
  Buffer b(count * es);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* p = b.data() + i * es;
    switch (t) {
      case DataType::kF32:
        storeAs<float>(p, floatInput(op, rank, i, salt));
        break;
      case DataType::kF64:
        storeAs<double>(p, floatInput(op, rank, i, salt));
        break;
      case DataType::kF16:
        storeAs<_Float16>(p, floatInput(op, rank, i, salt));
        break;
      case DataType::kBF16: {
        uint16_t v = refToBf16(static_cast<float>(floatInput(op, rank, i, salt)));
        std::memcpy(p, &v, 2);
        break;
      }
      default: {
        // Integers: arbitrary bits, so sums and products wrap.
        uint64_t h = mix((static_cast<uint64_t>(rank) << 40) ^ i ^ (uint64_t{salt} << 20) ^ 0x55);
        std::memcpy(p, &h, es);
        break;
      }
    }
  }
  return b;
}

template <class U, class S>
void reduceInts(ReduceOp op, int n, const std::vector<const uint8_t*>& in, uint8_t* out,
                size_t count) {
  for (size_t i = 0; i < count; ++i) {
    U acc;
    std::memcpy(&acc, in[0] + i * sizeof(U), sizeof(U));
    for (size_t r = 1; r < in.size(); ++r) {
      U v;
      std::memcpy(&v, in[r] + i * sizeof(U), sizeof(U));
      S sa = static_cast<S>(acc), sv = static_cast<S>(v);
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg:
          acc = static_cast<U>(acc + v);
          break;
        case ReduceOp::kProd:
          acc = static_cast<U>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(v));
          break;
        case ReduceOp::kMin:
          acc = static_cast<U>(sv < sa ? sv : sa);
          break;
        case ReduceOp::kMax:
          acc = static_cast<U>(sv > sa ? sv : sa);
          break;
      }
    }
    if (op == ReduceOp::kAvg) acc = static_cast<U>(static_cast<S>(acc) / static_cast<S>(n));
    std::memcpy(out + i * sizeof(U), &acc, sizeof(U));
  }
}

inline double loadFloat(DataType t, const uint8_t* p) {
  switch (t) {
    case DataType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DataType::kF64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DataType::kF16: {
      _Float16 h;
      std::memcpy(&h, p, 2);
      return static_cast<double>(h);
    }
    default: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return refFromBf16(b);
    }
  }
}

// Element-wise reduction of the inputs of all ranks (inputs[r] is rank r's buffer).
inline Buffer reduceReference(DataType t, ReduceOp op, const std::vector<Buffer>& inputs,
                              size_t count) {
  const size_t es = sizeOf(t);
  const int n = static_cast<int>(inputs.size());
  Buffer out(count * es);
  std::vector<const uint8_t*> in;
  for (auto& b : inputs) in.push_back(b.data());
  switch (t) {
    case DataType::kI8:
      reduceInts<uint8_t, int8_t>(op, n, in, out.data(), count);
      return out;
    case DataType::kU8:
      reduceInts<uint8_t, uint8_t>(op, n, in, out.data(), count);
      return out;
    case DataType::kI32:
      reduceInts<uint32_t, int32_t>(op, n, in, out.data(), count);
      return out;
    case DataType::kI64:
      reduceInts<uint64_t, int64_t>(op, n, in, out.data(), count);
      return out;
    default:
      break;
  }
  for (size_t i = 0; i < count; ++i) {
    // Exact in double for these inputs, so the order of reduction does not matter.
    double acc = loadFloat(t, in[0] + i * es);
    for (int r = 1; r < n; ++r) {
      double v = loadFloat(t, in[static_cast<size_t>(r)] + i * es);
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg:
          acc += v;
          break;
        case ReduceOp::kProd:
          acc *= v;
          break;
        case ReduceOp::kMin:
          acc = v < acc ? v : acc;
          break;
        case ReduceOp::kMax:
          acc = v > acc ? v : acc;
          break;
      }
    }
    uint8_t* p = out.data() + i * es;
    // Average: the sum in the element type, divided in that type's arithmetic (float for 16-bit).
    switch (t) {
      case DataType::kF32: {
        float f = static_cast<float>(acc);
        if (op == ReduceOp::kAvg) f = f / static_cast<float>(n);
        std::memcpy(p, &f, 4);
        break;
      }
      case DataType::kF64: {
        if (op == ReduceOp::kAvg) acc = acc / n;
        std::memcpy(p, &acc, 8);
        break;
      }
      case DataType::kF16: {
        float f = static_cast<float>(acc);
        if (op == ReduceOp::kAvg) f = f / static_cast<float>(n);
        _Float16 h = static_cast<_Float16>(f);
        std::memcpy(p, &h, 2);
        break;
      }
      default: {
        float f = static_cast<float>(acc);
        if (op == ReduceOp::kAvg) f = f / static_cast<float>(n);
        uint16_t b = refToBf16(f);
        std::memcpy(p, &b, 2);
        break;
      }
    }
  }
  return out;
}

// Index of the first differing element, or -1.
inline long firstDifference(const uint8_t* a, const uint8_t* b, size_t count, size_t es) {
  if (count == 0 || std::memcmp(a, b, count * es) == 0) return -1;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(a + i * es, b + i * es, es) != 0) return static_cast<long>(i);
  }
  return -1;
}

}  // namespace chorus::testing
