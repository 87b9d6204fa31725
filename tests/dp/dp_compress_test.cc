// Gradient compression in the Replica over thread-ranks: replicas stay bit-identical with every
// kind (Sync, and Delayed where supported), training stays close to uncompressed, compressed and
// plain buckets mix, the options are checked, and bf16 sends about half the bytes of f32.
#include "dp/mlp_model.h"
#include "harness/thread_ranks.h"

#include <gtest/gtest.h>
#include <chorus/dp.hpp>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace chorus::testing {
namespace {

struct TrainRun {
  std::vector<std::vector<std::vector<float>>> snaps;  // per rank, per step
  std::vector<dp::StepMetrics> metrics;                // rank 0's, per step
  double lossBefore = 0, lossAfter = 0;                // rank 0's
};

TrainRun train(int n, int steps, const std::string& compression, dp::Mode mode = dp::Mode::kSync) {
  TrainRun run;
  run.snaps.resize(static_cast<size_t>(n));
  expectRanks(n, [&](Communicator& c) {
    Mlp m(11);
    dp::Options o = smallBuckets();  // checkEvery 1: the hash check runs every step
    o.mode = mode;
    o.compression = dp::parseCompression(compression);
    o.compression.minElements = 16;  // w1, b1, w2 compressed; b2 (5 values) plain
    dp::Replica rep(c, o);
    m.registerWithShapes(rep);
    const size_t r = static_cast<size_t>(c.rank());
    if (r == 0) run.lossBefore = m.evalLoss();
    for (int s = 0; s < steps; ++s) {
      trainStep(rep, m, 0.2f, 1, [&](int) { return range((s * n + c.rank()) * 8, 8); });
      run.snaps[r].push_back(m.flat());
      if (r == 0) run.metrics.push_back(rep.lastMetrics());
    }
    if (r == 0) run.lossAfter = m.evalLoss();
  });
  return run;
}

void expectBitIdentical(const TrainRun& run) {
  for (size_t r = 1; r < run.snaps.size(); ++r) {
    for (size_t s = 0; s < run.snaps[r].size(); ++s) {
      const auto& a = run.snaps[0][s];
      const auto& b = run.snaps[r][s];
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
          << "rank " << r << " step " << s;
    }
  }
}

double maxDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  return worst;
}

class DpCompressed : public ::testing::TestWithParam<std::string> {};

TEST_P(DpCompressed, ReplicasStayBitIdenticalAndTrainCloseToUncompressed) {
  constexpr int kN = 3, kSteps = 5;
  const TrainRun plain = train(kN, kSteps, "none");
  const TrainRun got = train(kN, kSteps, GetParam());
  expectBitIdentical(got);
  const double d = maxDifference(got.snaps[0].back(), plain.snaps[0].back());
  EXPECT_GT(d, 0.0) << "no compression happened";
  // Low rank loses more per step than rounding; error feedback keeps both on course.
  EXPECT_LT(d, GetParam().starts_with("powersgd") ? 0.3 : 0.02);
  EXPECT_LT(got.lossAfter, 0.8 * got.lossBefore);
  // Three buckets ({b2, w2} fused, b1, w1): the fused one sends w2 compressed, b2 plain.
  const dp::StepMetrics& met = got.metrics.back();
  const int calls = GetParam().starts_with("powersgd") ? 2 + 1 + 2 : 2 + 1 + 1;
  EXPECT_EQ(met.buckets, calls);
}

INSTANTIATE_TEST_SUITE_P(Kinds, DpCompressed,
                         ::testing::Values("bf16", "fp16", "int8", "powersgd:1", "powersgd:2"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           for (char& ch : s) ch = ch == ':' ? '_' : ch;
                           return s;
                         });

TEST(DpCompressedDelayed, RoundingKindsWorkInDelayedModeToo) {
  const TrainRun got = train(2, 5, "int8", dp::Mode::kDelayed);
  expectBitIdentical(got);
  EXPECT_LT(got.lossAfter, got.lossBefore);
}

TEST(DpCompressedOptions, RejectsCombinationsThatCannotWork) {
  expectRanks(1, [](Communicator& c) {
    auto rejects = [&](dp::Options o, const std::string& what) {
      try {
        dp::Replica rep(c, o);
      } catch (const Error& e) {
        if (e.code() == ErrorCode::kInvalidArgument &&
            std::string(e.what()).find(what) != std::string::npos) {
          return;
        }
        throw std::runtime_error("wrong error: " + std::string(e.what()));
      }
      throw std::runtime_error("accepted: " + what);
    };
    dp::Options o;
    o.compression = dp::parseCompression("bf16");
    o.mode = dp::Mode::kLocalSgd;
    rejects(o, "compression bf16 applies to gradients");
    o.mode = dp::Mode::kDiLoCo;
    rejects(o, "compression bf16 applies to gradients");
    o.mode = dp::Mode::kDelayed;
    o.compression = dp::parseCompression("powersgd:2");
    rejects(o, "compression powersgd:2 needs Mode::kSync");
    o.mode = dp::Mode::kSync;
    o.compression.powerSgdRank = 0;
    rejects(o, "powerSgdRank must be >= 1");
  });
}

// A compressed bucket sends 2-byte values: about half the bytes of f32 (the consistency check and
// the plain bias add a little).
TEST(DpCompressedBytes, Bf16SendsAboutHalfOfNone) {
  auto bytesOf = [](const std::string& compression) {
    uint64_t sent = 0;
    expectRanks(2, [&](Communicator& c) {
      Mlp m(11);
      dp::Options o = smallBuckets();
      o.checkEvery = 0;
      o.compression = dp::parseCompression(compression);
      o.compression.minElements = 16;
      dp::Replica rep(c, o);
      m.registerWithShapes(rep);
      for (int s = 0; s < 3; ++s) {
        trainStep(rep, m, 0.2f, 1, [&](int) { return range((s * 2 + c.rank()) * 8, 8); });
        if (c.rank() == 0) sent += rep.lastMetrics().bytesSent;
      }
    });
    return sent;
  };
  const uint64_t none = bytesOf("none"), bf16 = bytesOf("bf16");
  // 320 floats per step, each rank sends about half of each all-reduce's payload at N = 2.
  ASSERT_GE(none, 3u * 320 * 4 / 2) << "bytesSent does not count the gradients";
  const double ratio = static_cast<double>(bf16) / static_cast<double>(none);
  EXPECT_GT(ratio, 0.45);
  EXPECT_LT(ratio, 0.6);
}

}  // namespace
}  // namespace chorus::testing
