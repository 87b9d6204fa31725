// Element types and reduction operations of the C++ API.
#pragma once

#include <chorus/export.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace chorus {

// Same values as chorus_dtype in chorus.h.
enum class DataType : uint8_t { kF32, kF64, kF16, kBF16, kI8, kU8, kI32, kI64 };
// Same values as chorus_op in chorus.h.
enum class ReduceOp : uint8_t { kSum, kProd, kMin, kMax, kAvg };

inline constexpr int kNumDataTypes = 8;
inline constexpr int kNumReduceOps = 5;

// IEEE binary16 and bfloat16 as raw bits; arithmetic on them goes through float.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

// Bytes per element; 0 for a value that is not a DataType.
constexpr size_t sizeOf(DataType t) {
  switch (t) {
    case DataType::kF64:
    case DataType::kI64:
      return 8;
    case DataType::kF32:
    case DataType::kI32:
      return 4;
    case DataType::kF16:
    case DataType::kBF16:
      return 2;
    case DataType::kI8:
    case DataType::kU8:
      return 1;
  }
  return 0;
}

constexpr bool isValid(DataType t) { return static_cast<unsigned>(t) < kNumDataTypes; }
constexpr bool isValid(ReduceOp op) { return static_cast<unsigned>(op) < kNumReduceOps; }

CHORUS_API std::string_view toString(DataType t);
CHORUS_API std::string_view toString(ReduceOp op);

// ---- Reduced-precision wire formats (docs/api.md) ----
// How an f32 all-reduce travels between ranks. Reduction stays in f32; every value is rounded to
// the wire format once at each hop that sends it. Same values as chorus_wire in chorus.h.
enum class WireFormat : uint8_t {
  kNative,    // the data's own type
  kBf16,      // bfloat16, round to nearest even
  kFp16,      // IEEE binary16, round to nearest even
  kInt8Block  // int8 in blocks of 256 values, one f32 scale (max |x| / 127) per block
};
inline constexpr int kNumWireFormats = 4;
constexpr bool isValid(WireFormat w) { return static_cast<unsigned>(w) < kNumWireFormats; }
// "native", "bf16", "fp16", "int8".
CHORUS_API std::string_view toString(WireFormat w);
// The inverse of toString; throws Error(kInvalidArgument) naming the choices.
CHORUS_API WireFormat parseWireFormat(std::string_view name);

// Options of one call (not of the communicator): the ranks must pass the same ones.
struct CallOptions {
  WireFormat wire = WireFormat::kNative;
};

template <class T>
struct DataTypeOf;
template <>
struct DataTypeOf<float> {
  static constexpr DataType value = DataType::kF32;
};
template <>
struct DataTypeOf<double> {
  static constexpr DataType value = DataType::kF64;
};
template <>
struct DataTypeOf<Half> {
  static constexpr DataType value = DataType::kF16;
};
template <>
struct DataTypeOf<BFloat16> {
  static constexpr DataType value = DataType::kBF16;
};
template <>
struct DataTypeOf<int8_t> {
  static constexpr DataType value = DataType::kI8;
};
template <>
struct DataTypeOf<uint8_t> {
  static constexpr DataType value = DataType::kU8;
};
template <>
struct DataTypeOf<int32_t> {
  static constexpr DataType value = DataType::kI32;
};
template <>
struct DataTypeOf<int64_t> {
  static constexpr DataType value = DataType::kI64;
};

template <class T>
inline constexpr DataType dataTypeOf = DataTypeOf<std::remove_const_t<T>>::value;

}  // namespace chorus
