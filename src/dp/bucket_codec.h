// Compression of one bucket on its way through the all-reduce (docs/dp.md, "Gradient
// compression"): which tensors are compressed, the calls that carry them, and the averaged
// gradients they give back. One codec per compressed bucket; it keeps that bucket's error
// feedback (and PowerSGD's warm-started factors) from step to step.
#pragma once

#include <chorus/communicator.hpp>
#include <chorus/dp.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace chorus::dp {

// A tensor of the bucket: its place in the bucket's gradient buffer and its shape.
struct CodecTensor {
  size_t offset = 0;  // elements into the bucket
  size_t count = 0;
  std::vector<size_t> shape;
};

// Whether `c` compresses a tensor of this shape (at least minElements values; for PowerSGD a
// matrix, shape[0] x the rest, with min(rows, cols) > R).
bool compressible(const CompressionOptions& c, const std::vector<size_t>& shape, size_t count);

class BucketCodec {
 public:
  // Null when none of `tensors` is compressible. Rounding kinds need the compressible tensors
  // first in the bucket (one wire-format call for them, one plain call for the rest). `seed`
  // must be the same on every rank (PowerSGD's first Q).
  static std::unique_ptr<BucketCodec> make(const CompressionOptions& c,
                                           std::vector<CodecTensor> tensors, uint64_t seed);
  virtual ~BucketCodec() = default;

  // First phase: compresses the bucket's gradients in `grads` and issues its all-reduces (avg),
  // appending their Works. Returns the f32 payload bytes of those calls.
  virtual uint64_t launch(Communicator& comm, float* grads, std::vector<Work>& works) = 0;
  // PowerSGD: the second all-reduce, once the first phase's Works completed.
  virtual bool twoPhases() const { return false; }
  virtual uint64_t launchSecond(Communicator&, std::vector<Work>&) { return 0; }
  // Every Work completed: `grads` receives the averaged (decompressed) gradients.
  virtual void finish(float* grads) = 0;
  // Forgets error feedback and warm starts (after a membership change).
  virtual void reset() = 0;
};

}  // namespace chorus::dp
