// Reduced-precision wire formats of the f32 all-reduce: f32 values <-> bytes on the wire.
//
// bf16 / fp16: 2 bytes a value, round to nearest even. int8 blocks: the values are cut into
// blocks of kWireBlock (the last one shorter); a message of c values holds the ceil(c / 256)
// f32 scales first, then c int8 values. A block's scale is max |x| / 127 (0 for a block of zeros);
// each value becomes the int8 nearest to x / scale (ties to even, clamped to +-127), and decodes
// as q * scale. Every call encodes a run of values on its own: its blocks start at its first
// value, so a caller that cuts a buffer into pieces (ring segments) decides the block layout.
#pragma once

#include <chorus/types.hpp>

#include <cstddef>

namespace chorus::reduce {

inline constexpr size_t kWireBlock = 256;

// Bytes that `count` f32 values take on the wire (kNative: 4 each).
constexpr size_t wireBytes(WireFormat w, size_t count) {
  switch (w) {
    case WireFormat::kBf16:
    case WireFormat::kFp16:
      return 2 * count;
    case WireFormat::kInt8Block:
      return count + 4 * ((count + kWireBlock - 1) / kWireBlock);
    case WireFormat::kNative:
      break;
  }
  return 4 * count;
}

// Wire bytes per f32 byte, for the cost model: 1/2 for 16-bit, (1 + 4/256) / 4 for int8.
constexpr double wireRatio(WireFormat w) {
  switch (w) {
    case WireFormat::kBf16:
    case WireFormat::kFp16:
      return 0.5;
    case WireFormat::kInt8Block:
      return (1.0 + 4.0 / kWireBlock) / 4.0;
    case WireFormat::kNative:
      break;
  }
  return 1.0;
}

// wire = encode(src): wireBytes(w, count) bytes.
void wireEncode(WireFormat w, void* wire, const float* src, size_t count);
// dst = decode(wire).
void wireDecode(WireFormat w, float* dst, const void* wire, size_t count);
// dst = mine + decode(wire) (one f32 add per value; dst may be mine).
void wireDecodeAdd(WireFormat w, float* dst, const float* mine, const void* wire, size_t count);

}  // namespace chorus::reduce
