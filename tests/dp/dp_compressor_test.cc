// The compressors alone: rounding to each wire precision, error feedback (what was sent sums to
// the true gradients up to the last step's error), PowerSGD's factors, and the text form of
// CompressionOptions.
#include "dp/compress_powersgd.h"
#include "dp/compress_rounding.h"
#include "harness/thread_ranks.h"

#include <gtest/gtest.h>
#include <chorus/dp.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace chorus::testing {
namespace {

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Independent bf16 reference: the two neighbours by truncation, the nearer one (ties: even).
float bf16Reference(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  const float lo = std::bit_cast<float>(b & 0xffff0000u);
  const float hi = std::bit_cast<float>((b & 0xffff0000u) + 0x10000u);
  const double dl = std::fabs(double(x) - lo), dh = std::fabs(double(hi) - x);
  if (dl != dh) return dl < dh ? lo : hi;
  return ((b >> 16) & 1u) == 0 ? lo : hi;
}

TEST(DpRounding, Bf16AndFp16RoundToNearestEven) {
  std::vector<float> xs = gaussian(20000, 1, 3.0f);
  for (float e : {1e-6f, 1e-8f, 3e-5f, 6.1e-5f, 70000.0f, 65519.0f, 65520.0f, 65504.0f, 1e30f}) {
    xs.push_back(e);
    xs.push_back(-e);
  }
  const auto small = gaussian(5000, 2, 1e-5f);  // fp16 subnormals
  xs.insert(xs.end(), small.begin(), small.end());
  for (float x : xs) {
    ASSERT_EQ(dp::roundToBf16(x), bf16Reference(x)) << x;
    // The compiler's own conversion to IEEE binary16 rounds to nearest even.
    const float want = static_cast<float>(static_cast<_Float16>(x));
    ASSERT_EQ(dp::roundToFp16(x), want) << x;
  }
  EXPECT_TRUE(std::isnan(dp::roundToBf16(std::numeric_limits<float>::quiet_NaN())));
}

TEST(DpRounding, Int8BlocksStayWithinHalfAStepOfTheirScale) {
  auto x = gaussian(1000, 3);                         // 3 full blocks and one of 232
  for (size_t i = 256; i < 512; ++i) x[i] *= 100.0f;  // each block has its own scale
  std::fill(x.begin() + 512, x.begin() + 768, 0.0f);
  auto r = x;
  dp::roundToInt8Blocks(r.data(), r.size());
  for (size_t base = 0; base < x.size(); base += 256) {
    float m = 0;
    for (size_t i = base; i < std::min(x.size(), base + 256); ++i) m = std::max(m, std::fabs(x[i]));
    const float scale = m / 127.0f;
    for (size_t i = base; i < std::min(x.size(), base + 256); ++i) {
      ASSERT_LE(std::fabs(r[i] - x[i]), 0.5f * scale * 1.0001f) << i;
      const float q = r[i] / (scale > 0 ? scale : 1.0f);
      ASSERT_NEAR(q, std::nearbyint(q), 1e-3) << i;  // a whole number of steps
    }
  }
}

// Over many steps, sum(sent) = sum(true gradients) - the error kept after the last step: nothing
// is lost, only delayed. Without error feedback the gap grows with the steps.
class DpErrorFeedback : public ::testing::TestWithParam<dp::Compression> {};

TEST_P(DpErrorFeedback, SentSumsToTheTrueGradientsUpToTheLastError) {
  constexpr size_t kN = 700;
  constexpr int kSteps = 200;
  for (bool feedback : {true, false}) {
    dp::RoundingCompressor c(GetParam(), kN, feedback);
    std::vector<double> sent(kN), truth(kN);
    for (int s = 0; s < kSteps; ++s) {
      // A steady bias in every gradient, as in training, so that rounding errors accumulate.
      auto g = gaussian(kN, 100 + static_cast<uint32_t>(s), 0.01f);
      for (size_t i = 0; i < kN; ++i) g[i] += 0.3f + 1e-3f * static_cast<float>(i % 7);
      for (size_t i = 0; i < kN; ++i) truth[i] += g[i];
      c.compress(g.data());
      for (size_t i = 0; i < kN; ++i) sent[i] += g[i];
    }
    double worstGap = 0, worstWithError = 0;
    for (size_t i = 0; i < kN; ++i) {
      const double err = feedback ? c.error()[i] : 0.0;
      worstGap = std::max(worstGap, std::fabs(truth[i] - sent[i]));
      worstWithError = std::max(worstWithError, std::fabs(truth[i] - sent[i] - err));
    }
    if (feedback) {
      EXPECT_LT(worstWithError, 1e-4) << "sum(sent) + last error differs from sum(true)";
    } else {
      EXPECT_GT(worstGap, 1e-3) << "without error feedback the rounding should accumulate";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, DpErrorFeedback,
                         ::testing::Values(dp::Compression::kBf16, dp::Compression::kFp16,
                                           dp::Compression::kInt8),
                         [](const ::testing::TestParamInfo<dp::Compression>& i) {
                           return dp::toString(dp::CompressionOptions{i.param});
                         });

// One PowerSGD step on one rank (the all-reduces of one rank are the identity).
std::vector<float> powerSgdStep(dp::PowerSgdCompressor& c, const std::vector<float>& g) {
  std::vector<float> p(c.pCount()), q(c.qCount()), out(g.size());
  c.project(g.data(), p.data());
  dp::PowerSgdCompressor::orthonormalize(p.data(), c.rows(), c.rank());
  c.projectBack(p.data(), q.data());
  c.decompress(p.data(), q.data(), out.data());
  return out;
}

TEST(DpPowerSgd, SentSumsToTheTrueGradientsUpToTheLastError) {
  constexpr size_t kRows = 12, kCols = 20;
  constexpr int kSteps = 60;
  dp::PowerSgdCompressor c(kRows, kCols, 2, true, 5);
  std::vector<double> sent(kRows * kCols), truth(kRows * kCols);
  double firstError = 0;
  for (int s = 0; s < kSteps; ++s) {
    const auto g = gaussian(kRows * kCols, 200 + static_cast<uint32_t>(s));
    const auto out = powerSgdStep(c, g);
    for (size_t i = 0; i < g.size(); ++i) {
      truth[i] += g[i];
      sent[i] += out[i];
    }
    if (s == 0) {
      for (float e : c.error()) firstError = std::max(firstError, double(std::fabs(e)));
    }
  }
  ASSERT_GT(firstError, 0.1) << "rank 2 of a random 12 x 20 matrix should leave an error";
  double worst = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    worst = std::max(worst, std::fabs(truth[i] - sent[i] - c.error()[i]));
  }
  EXPECT_LT(worst, 1e-3);
}

TEST(DpPowerSgd, OrthonormalizeGivesOrthonormalColumnsAndKeepsZeroColumns) {
  constexpr size_t kRows = 9;
  auto p = gaussian(kRows * 3, 9);  // column c at p[c * kRows]
  for (size_t i = 0; i < kRows; ++i) p[2 * kRows + i] = 0;
  dp::PowerSgdCompressor::orthonormalize(p.data(), kRows, 3);
  for (size_t a = 0; a < 3; ++a) {
    for (size_t b = 0; b < 3; ++b) {
      double dot = 0;
      for (size_t i = 0; i < kRows; ++i) dot += double(p[a * kRows + i]) * p[b * kRows + i];
      const double want = a == b && a < 2 ? 1.0 : 0.0;
      EXPECT_NEAR(dot, want, 1e-6) << a << "," << b;
    }
  }
}

// At full rank (R = rows <= cols) P spans everything: the result is the plain average, on every
// rank the same bits, also with the per-rank error feedback.
TEST(DpPowerSgd, FullRankEqualsPlainAveraging) {
  constexpr int kN = 3, kSteps = 5;
  constexpr size_t kRows = 6, kCols = 10;
  auto gradientOf = [](int rank, int step) {
    return gaussian(kRows * kCols, static_cast<uint32_t>(1000 * rank + step));
  };
  std::vector<std::vector<std::vector<float>>> got(kN);
  expectRanks(kN, [&](Communicator& comm) {
    dp::PowerSgdCompressor c(kRows, kCols, static_cast<int>(kRows), true, 77);
    for (int s = 0; s < kSteps; ++s) {
      const auto g = gradientOf(comm.rank(), s);
      std::vector<float> p(c.pCount()), q(c.qCount()), out(g.size());
      c.project(g.data(), p.data());
      comm.allReduce(std::span<float>(p), ReduceOp::kAvg).wait();
      dp::PowerSgdCompressor::orthonormalize(p.data(), kRows, static_cast<int>(kRows));
      c.projectBack(p.data(), q.data());
      comm.allReduce(std::span<float>(q), ReduceOp::kAvg).wait();
      c.decompress(p.data(), q.data(), out.data());
      got[static_cast<size_t>(comm.rank())].push_back(out);
    }
  });
  for (int s = 0; s < kSteps; ++s) {
    std::vector<double> avg(kRows * kCols);
    for (int r = 0; r < kN; ++r) {
      const auto g = gradientOf(r, s);
      for (size_t i = 0; i < avg.size(); ++i) avg[i] += g[i] / kN;
    }
    const auto& mine = got[0][static_cast<size_t>(s)];
    for (size_t i = 0; i < avg.size(); ++i) {
      ASSERT_NEAR(mine[i], avg[i], 1e-4) << "step " << s << " element " << i;
    }
    for (int r = 1; r < kN; ++r) {
      const auto& other = got[static_cast<size_t>(r)][static_cast<size_t>(s)];
      ASSERT_EQ(std::memcmp(mine.data(), other.data(), mine.size() * sizeof(float)), 0)
          << "rank " << r << " step " << s;
    }
  }
}

TEST(DpCompressionText, ParsesEveryKindAndPrintsItBack) {
  for (const char* text : {"none", "bf16", "fp16", "int8", "powersgd:1", "powersgd:16"}) {
    EXPECT_EQ(dp::toString(dp::parseCompression(text)), text);
  }
  const auto c = dp::parseCompression("powersgd:4");
  EXPECT_EQ(c.kind, dp::Compression::kPowerSgd);
  EXPECT_EQ(c.powerSgdRank, 4);
  EXPECT_EQ(dp::parseCompression("int8").kind, dp::Compression::kInt8);
}

TEST(DpCompressionText, RejectsAnythingElseNamingTheText) {
  for (const char* text : {"", "bf", "BF16", "int8 ", "powersgd", "powersgd:", "powersgd:0",
                           "powersgd:-1", "powersgd:x", "powersgd:2x", "powersgd2", "fp32"}) {
    try {
      dp::parseCompression(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << text;
      EXPECT_NE(std::string(e.what()).find("'" + std::string(text) + "'"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace chorus::testing
