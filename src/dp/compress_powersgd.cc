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

void PowerSgdCompressor::drawColumn(int r) {
  const auto R = static_cast<size_t>(rank_);
  for (size_t j = 0; j < cols_; ++j) {
    // Uniform in [-1, 1): 24 random bits.
    const uint64_t bits = mix(seed_ ^ mix(draws_++)) >> 40;
    q_[j * R + static_cast<size_t>(r)] = static_cast<float>(bits) * 0x1p-23f - 1.0f;
  }
}

void PowerSgdCompressor::reset() {
  std::fill(residual_.begin(), residual_.end(), 0.0f);
  draws_ = 0;
  for (int r = 0; r < rank_; ++r) drawColumn(r);
}

void PowerSgdCompressor::project(const float* grad, float* p) {
  const auto R = static_cast<size_t>(rank_);
  // A column of Q that became zero (a zero gradient) would stay zero forever: draw it again.
  // Q is the same on every rank, so they all draw the same.
  for (int r = 0; r < rank_; ++r) {
    bool zero = true;
    for (size_t j = 0; j < cols_ && zero; ++j) zero = q_[j * R + static_cast<size_t>(r)] == 0.0f;
    if (zero) drawColumn(r);
  }
  float* m = residual_.data();
  for (size_t k = 0; k < rows_ * cols_; ++k) m[k] = errorFeedback_ ? m[k] + grad[k] : grad[k];
  std::fill(p, p + rows_ * R, 0.0f);
  for (size_t i = 0; i < rows_; ++i) {
    float* pi = p + i * R;
    const float* mi = m + i * cols_;
    for (size_t j = 0; j < cols_; ++j) {
      const float v = mi[j];
      const float* qj = q_.data() + j * R;
      for (size_t r = 0; r < R; ++r) pi[r] += v * qj[r];
    }
  }
}

void PowerSgdCompressor::orthonormalize(float* p, size_t rows, int rank) {
  const auto R = static_cast<size_t>(rank);
  for (size_t c = 0; c < R; ++c) {
    for (size_t prev = 0; prev < c; ++prev) {
      double dot = 0;
      for (size_t i = 0; i < rows; ++i) dot += double(p[i * R + c]) * double(p[i * R + prev]);
      for (size_t i = 0; i < rows; ++i)
        p[i * R + c] = static_cast<float>(p[i * R + c] - dot * p[i * R + prev]);
    }
    double norm = 0;
    for (size_t i = 0; i < rows; ++i) norm += double(p[i * R + c]) * double(p[i * R + c]);
    norm = std::sqrt(norm);
    // Below this the column is rounding noise of the others (or the gradient was zero).
    const double scale = norm > 1e-30 ? 1.0 / norm : 0.0;
    for (size_t i = 0; i < rows; ++i) p[i * R + c] = static_cast<float>(p[i * R + c] * scale);
  }
}

void PowerSgdCompressor::projectBack(const float* p, float* q) const {
  const auto R = static_cast<size_t>(rank_);
  std::fill(q, q + cols_ * R, 0.0f);
  const float* m = residual_.data();
  for (size_t i = 0; i < rows_; ++i) {
    const float* pi = p + i * R;
    const float* mi = m + i * cols_;
    for (size_t j = 0; j < cols_; ++j) {
      const float v = mi[j];
      float* qj = q + j * R;
      for (size_t r = 0; r < R; ++r) qj[r] += v * pi[r];
    }
  }
}

void PowerSgdCompressor::decompress(const float* p, const float* q, float* grad) {
  const auto R = static_cast<size_t>(rank_);
  float* m = residual_.data();
  for (size_t i = 0; i < rows_; ++i) {
    const float* pi = p + i * R;
    for (size_t j = 0; j < cols_; ++j) {
      const float* qj = q + j * R;
      float v = 0;
      for (size_t r = 0; r < R; ++r) v += pi[r] * qj[r];
      const size_t k = i * cols_ + j;
      grad[k] = v;
      m[k] = errorFeedback_ ? m[k] - v : 0.0f;
    }
  }
  std::copy(q, q + cols_ * R, q_.begin());
}

}  // namespace chorus::dp
