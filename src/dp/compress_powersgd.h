// PowerSGD for one matrix-shaped gradient: a rank-R approximation P Q^T found by one step of
// power iteration per training step (Q warm-started from the last step), with error feedback.
// The Replica all-reduces P between project() and projectBack(), and Q between projectBack()
// and decompress(); every rank then holds the same P and Q, hence the same approximation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus::dp {

class PowerSgdCompressor {
 public:
  // A rows x cols matrix (row-major); 1 <= rank <= min(rows, cols). `seed` must be equal on
  // every rank: it draws the first Q.
  PowerSgdCompressor(size_t rows, size_t cols, int rank, bool errorFeedback, uint64_t seed);

  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }
  int rank() const { return rank_; }
  // P (rows x rank) and Q (cols x rank) are stored column after column.
  size_t pCount() const { return rows_ * static_cast<size_t>(rank_); }
  size_t qCount() const { return cols_ * static_cast<size_t>(rank_); }

  // M = grad + error (kept until decompress); p = M Q.
  void project(const float* grad, float* p);
  // Orthonormal columns (modified Gram-Schmidt; column c at p + c * rows); a column that
  // vanishes stays zero. The same input gives the same bits everywhere.
  static void orthonormalize(float* p, size_t rows, int rank);
  // q = M^T p.
  void projectBack(const float* p, float* q) const;
  // grad = p q^T; error = M - grad (with error feedback); q becomes the next step's Q.
  void decompress(const float* p, const float* q, float* grad);
  // Forgets the error and draws Q again from the seed (membership change).
  void reset();

  // Residual carried to the next step (zeros without error feedback).
  const std::vector<float>& error() const { return residual_; }

 private:
  void drawColumn(int r);

  size_t rows_, cols_;
  int rank_;
  bool errorFeedback_;
  uint64_t seed_, draws_ = 0;
  std::vector<float> q_;         // cols x rank, column after column
  std::vector<float> residual_;  // error between steps, M during a step
};

}  // namespace chorus::dp
