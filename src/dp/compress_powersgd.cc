#include "dp/compress_powersgd.h"

#include <algorithm>
#include <cmath>

namespace chorus::dp {
namespace {

// splitmix64: a fixed generator, so that every rank (and every build) draws the same Q.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

PowerSgdCompressor::PowerSgdCompressor(size_t rows, size_t cols, int rank, bool errorFeedback,
                                       uint64_t seed)
    : rows_(rows),
      cols_(cols),
      rank_(rank),
      errorFeedback_(errorFeedback),
      seed_(seed),
      q_(cols * static_cast<size_t>(rank)),
      residual_(rows * cols) {
  reset();
}

// Layouts: column r of P (rows values) at p + r * rows, column r of Q (cols values) at
// q + r * cols, so that every loop below runs over contiguous memory.

void PowerSgdCompressor::drawColumn(int r) {
  float* column = q_.data() + static_cast<size_t>(r) * cols_;
  for (size_t j = 0; j < cols_; ++j) {
    // Uniform in [-1, 1): 24 random bits.
    const uint64_t bits = mix(seed_ ^ mix(draws_++)) >> 40;
    column[j] = static_cast<float>(bits) * 0x1p-23f - 1.0f;
  }
}

void PowerSgdCompressor::reset() {
  std::fill(residual_.begin(), residual_.end(), 0.0f);
  draws_ = 0;
  for (int r = 0; r < rank_; ++r) drawColumn(r);
}

namespace {

// Eight partial sums: the compiler keeps them in vector registers (a single running sum would
// wait on each addition). The order is fixed, so the result is too.
float dot(const float* a, const float* b, size_t n) {
  float part[8] = {};
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (size_t k = 0; k < 8; ++k) part[k] += a[j + k] * b[j + k];
  }
  float sum = 0;
  for (; j < n; ++j) sum += a[j] * b[j];
  for (float x : part) sum += x;
  return sum;
}

}  // namespace

void PowerSgdCompressor::project(const float* grad, float* p) {
  // A column of Q that became zero (a zero gradient) would stay zero forever: draw it again.
  // Q is the same on every rank, so they all draw the same.
  for (int r = 0; r < rank_; ++r) {
    const float* column = q_.data() + static_cast<size_t>(r) * cols_;
    if (std::all_of(column, column + cols_, [](float x) { return x == 0.0f; })) drawColumn(r);
  }
  float* m = residual_.data();
  for (size_t k = 0; k < rows_ * cols_; ++k) m[k] = errorFeedback_ ? m[k] + grad[k] : grad[k];
  for (int r = 0; r < rank_; ++r) {
    const float* qr = q_.data() + static_cast<size_t>(r) * cols_;
    float* pr = p + static_cast<size_t>(r) * rows_;
    for (size_t i = 0; i < rows_; ++i) pr[i] = dot(m + i * cols_, qr, cols_);
  }
}

void PowerSgdCompressor::orthonormalize(float* p, size_t rows, int rank) {
  for (int c = 0; c < rank; ++c) {
    float* pc = p + static_cast<size_t>(c) * rows;
    for (int prev = 0; prev < c; ++prev) {
      const float* pp = p + static_cast<size_t>(prev) * rows;
      double d = 0;
      for (size_t i = 0; i < rows; ++i) d += double(pc[i]) * double(pp[i]);
      for (size_t i = 0; i < rows; ++i) pc[i] = static_cast<float>(pc[i] - d * pp[i]);
    }
    double norm = 0;
    for (size_t i = 0; i < rows; ++i) norm += double(pc[i]) * double(pc[i]);
    norm = std::sqrt(norm);
    // Below this the column is rounding noise of the others (or the gradient was zero).
    const double scale = norm > 1e-30 ? 1.0 / norm : 0.0;
    for (size_t i = 0; i < rows; ++i) pc[i] = static_cast<float>(pc[i] * scale);
  }
}

void PowerSgdCompressor::projectBack(const float* p, float* q) const {
  std::fill(q, q + cols_ * static_cast<size_t>(rank_), 0.0f);
  const float* m = residual_.data();
  for (int r = 0; r < rank_; ++r) {
    const float* pr = p + static_cast<size_t>(r) * rows_;
    float* qr = q + static_cast<size_t>(r) * cols_;
    for (size_t i = 0; i < rows_; ++i) {
      const float w = pr[i];
      const float* mi = m + i * cols_;
      for (size_t j = 0; j < cols_; ++j) qr[j] += w * mi[j];
    }
  }
}

void PowerSgdCompressor::decompress(const float* p, const float* q, float* grad) {
  float* m = residual_.data();
  for (size_t i = 0; i < rows_; ++i) {
    float* gi = grad + i * cols_;
    std::fill(gi, gi + cols_, 0.0f);
    for (int r = 0; r < rank_; ++r) {
      const float w = p[static_cast<size_t>(r) * rows_ + i];
      const float* qr = q + static_cast<size_t>(r) * cols_;
      for (size_t j = 0; j < cols_; ++j) gi[j] += w * qr[j];
    }
    float* mi = m + i * cols_;
    for (size_t j = 0; j < cols_; ++j) mi[j] = errorFeedback_ ? mi[j] - gi[j] : 0.0f;
  }
  std::copy(q, q + cols_ * static_cast<size_t>(rank_), q_.begin());
}

}  // namespace chorus::dp
