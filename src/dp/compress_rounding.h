// Error-feedback rounding: a run of f32 values rounded to the precision a wire format keeps
// (bf16, fp16, int8 blocks), with this rank's rounding error carried into the next step.
#pragma once

#include <chorus/dp.hpp>

#include <cstddef>
#include <vector>

namespace chorus::dp {

// Values per int8 block (one f32 scale each), as the library's kInt8Block wire format.
inline constexpr size_t kInt8Block = 256;

float roundToBf16(float x);  // round to nearest even; NaN and infinities kept
float roundToFp16(float x);  // round to nearest even; overflow to infinity
// Each block of kInt8Block values (from data[0]; the last may be shorter) becomes q * scale with
// scale = max |x| / 127 and q the nearest integer (ties to even) to x / scale.
void roundToInt8Blocks(float* data, size_t count);
// In place: data[i] = what it becomes in `kind`'s precision (kBf16, kFp16 or kInt8).
void roundTo(Compression kind, float* data, size_t count);

class RoundingCompressor {
 public:
  RoundingCompressor(Compression kind, size_t count, bool errorFeedback);

  // data (count values) = round(data + error); error = (data + error) - that rounding. What
  // this rank sends is then exactly representable on the wire: the error it keeps is all of its
  // own rounding.
  void compress(float* data);
  // Forgets the error (membership change).
  void reset();

  const std::vector<float>& error() const { return error_; }
  size_t count() const { return count_; }

 private:
  Compression kind_;
  size_t count_;
  bool errorFeedback_;
  std::vector<float> error_;  // empty without error feedback
};

}  // namespace chorus::dp
