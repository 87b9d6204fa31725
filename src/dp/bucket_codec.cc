#include "dp/bucket_codec.h"

#include "dp/compress_powersgd.h"
#include "dp/compress_rounding.h"
#include "dp/wire_call.h"

#include <algorithm>

namespace chorus::dp {
namespace {

size_t product(const std::vector<size_t>& shape, size_t from) {
  size_t n = 1;
  for (size_t i = from; i < shape.size(); ++i) n *= shape[i];
  return n;
}

// bf16, fp16, int8: the compressible tensors (first in the bucket) are rounded with error
// feedback and travel in the wire format; the rest travel as f32 in a second call.
class RoundingBucket final : public BucketCodec {
 public:
  RoundingBucket(const CompressionOptions& c, size_t compressed, size_t total)
      : kind_(c.kind), rounding_(c.kind, compressed, c.errorFeedback), total_(total) {}

  uint64_t launch(Communicator& comm, float* grads, std::vector<Work>& works) override {
    const size_t n = rounding_.count();
    rounding_.compress(grads);
    works.push_back(allReduceAs(comm, grads, n, kind_));
    if (total_ > n) works.push_back(allReduceAs(comm, grads + n, total_ - n, Compression::kNone));
    return total_ * sizeof(float);
  }
  void finish(float*) override {}  // reduced in place
  void reset() override { rounding_.reset(); }

 private:
  Compression kind_;
  RoundingCompressor rounding_;
  size_t total_;
};

// PowerSGD: call one carries every matrix's P and the other tensors as they are; call two every
// matrix's Q.
class PowerSgdBucket final : public BucketCodec {
 public:
  PowerSgdBucket(const CompressionOptions& c, std::vector<CodecTensor> tensors, uint64_t seed) {
    size_t at = 0, qAt = 0;
    for (CodecTensor& t : tensors) {
      if (!compressible(c, t.shape, t.count)) {
        plain_.push_back(std::move(t));
        continue;
      }
      const size_t rows = t.shape[0];
      Matrix m{t.offset, at, qAt,
               PowerSgdCompressor(rows, t.count / rows, c.powerSgdRank, c.errorFeedback,
                                  seed * 0x100000001b3ull + t.offset)};
      at += m.compressor.pCount();
      qAt += m.compressor.qCount();
      matrices_.push_back(std::move(m));
    }
    plainAt_ = at;
    for (const CodecTensor& t : plain_) at += t.count;
    first_.resize(at);
    second_.resize(qAt);
  }

  uint64_t launch(Communicator& comm, float* grads, std::vector<Work>& works) override {
    for (Matrix& m : matrices_) m.compressor.project(grads + m.offset, first_.data() + m.pAt);
    size_t at = plainAt_;
    for (const CodecTensor& t : plain_) {
      std::copy(grads + t.offset, grads + t.offset + t.count, first_.begin() + long(at));
      at += t.count;
    }
    works.push_back(allReduceAs(comm, first_.data(), first_.size(), Compression::kNone));
    return first_.size() * sizeof(float);
  }

  bool twoPhases() const override { return true; }

  uint64_t launchSecond(Communicator& comm, std::vector<Work>& works) override {
    for (Matrix& m : matrices_) {
      float* p = first_.data() + m.pAt;
      PowerSgdCompressor::orthonormalize(p, m.compressor.rows(), m.compressor.rank());
      m.compressor.projectBack(p, second_.data() + m.qAt);
    }
    works.push_back(allReduceAs(comm, second_.data(), second_.size(), Compression::kNone));
    return second_.size() * sizeof(float);
  }

  void finish(float* grads) override {
    for (Matrix& m : matrices_) {
      m.compressor.decompress(first_.data() + m.pAt, second_.data() + m.qAt, grads + m.offset);
    }
    size_t at = plainAt_;
    for (const CodecTensor& t : plain_) {
      std::copy(first_.begin() + long(at), first_.begin() + long(at + t.count), grads + t.offset);
      at += t.count;
    }
  }

  void reset() override {
    for (Matrix& m : matrices_) m.compressor.reset();
  }

 private:
  struct Matrix {
    size_t offset;  // in the bucket
    size_t pAt;     // in first_
    size_t qAt;     // in second_
    PowerSgdCompressor compressor;
  };
  std::vector<Matrix> matrices_;
  std::vector<CodecTensor> plain_;
  size_t plainAt_ = 0;
  std::vector<float> first_;   // P of every matrix, then the plain tensors
  std::vector<float> second_;  // Q of every matrix
};

}  // namespace

bool compressible(const CompressionOptions& c, const std::vector<size_t>& shape, size_t count) {
  if (c.kind == Compression::kNone || count < c.minElements || count == 0) return false;
  if (c.kind != Compression::kPowerSgd) return true;
  if (shape.size() < 2 || shape[0] == 0) return false;
  const size_t rows = shape[0], cols = product(shape, 1);
  return std::min(rows, cols) > static_cast<size_t>(c.powerSgdRank);
}

std::unique_ptr<BucketCodec> BucketCodec::make(const CompressionOptions& c,
                                               std::vector<CodecTensor> tensors, uint64_t seed) {
  size_t compressed = 0, total = 0;
  bool any = false;
  for (const CodecTensor& t : tensors) {
    total += t.count;
    if (!compressible(c, t.shape, t.count)) continue;
    any = true;
    // Rounding kinds send one leading run in the wire format.
    if (t.offset == compressed) compressed += t.count;
  }
  if (!any) return nullptr;
  if (c.kind == Compression::kPowerSgd) {
    return std::make_unique<PowerSgdBucket>(c, std::move(tensors), seed);
  }
  return std::make_unique<RoundingBucket>(c, compressed, total);
}

}  // namespace chorus::dp
