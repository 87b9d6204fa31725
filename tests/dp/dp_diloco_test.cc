// DiLoCo over thread-ranks: with H = 1, outer lr 1 and no momentum it is sync training; with
// fragments every parameter syncs exactly once per H steps and never all at once; it learns with
// Nesterov momentum, reports the divergence before syncs, and rejects what it cannot do.
#include "dp/diloco.h"
#include "dp/mlp_model.h"
#include "harness/thread_ranks.h"

#include <gtest/gtest.h>
#include <chorus/dp.hpp>

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace chorus::testing {
namespace {

dp::Options dilocoOptions(int h, double lr, double momentum, int fragments = 1) {
  dp::Options o = smallBuckets();
  o.mode = dp::Mode::kDiLoCo;
  o.diloco.syncEvery = h;
  o.diloco.outerLr = lr;
  o.diloco.outerMomentum = momentum;
  o.diloco.fragments = fragments;
  return o;
}

TEST(DpDiLoCo, OneStepLrOneNoMomentumEqualsSyncTraining) {
  constexpr int kN = 3, kSteps = 6, kBatch = 4;
  constexpr float kLr = 0.2f;
  std::vector<std::vector<float>> final(kN);
  expectRanks(kN, [&](Communicator& c) {
    Mlp m(7);
    dp::Replica rep(c, dilocoOptions(1, 1.0, 0.0));
    m.registerWith(rep);
    for (int s = 0; s < kSteps; ++s) {
      trainStep(rep, m, kLr, 1, [&](int) { return range((s * kN + c.rank()) * kBatch, kBatch); });
    }
    final[static_cast<size_t>(c.rank())] = m.flat();
  });
  Mlp ref(7);
  for (int s = 0; s < kSteps; ++s) {
    ref.backward(range(s * kN * kBatch, kN * kBatch));
    ref.sgd(kLr);
    ref.zeroGrad();
  }
  const auto want = ref.flat();
  for (int r = 0; r < kN; ++r) {
    const auto& got = final[static_cast<size_t>(r)];
    ASSERT_EQ(std::memcmp(got.data(), final[0].data(), got.size() * sizeof(float)), 0);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-5 + 1e-4 * std::fabs(want[i])) << "element " << i;
    }
  }
}

TEST(DpDiLoCo, SplitCutsContiguousFragmentsOfAboutEqualSize) {
  using Ranges = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(dp::DiLoCo::split({189, 21, 105, 5}, 1), (Ranges{{0, 4}}));
  EXPECT_EQ(dp::DiLoCo::split({189, 21, 105, 5}, 2), (Ranges{{0, 1}, {1, 4}}));
  EXPECT_EQ(dp::DiLoCo::split({189, 21, 105, 5}, 4), (Ranges{{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
  EXPECT_EQ(dp::DiLoCo::split({10, 10, 10, 10, 10, 10}, 3), (Ranges{{0, 2}, {2, 4}, {4, 6}}));
  EXPECT_EQ(dp::DiLoCo::split({1, 1, 100}, 3), (Ranges{{0, 1}, {1, 2}, {2, 3}}));
}

// Ranks train on different data, so a tensor is identical across ranks right after a step only
// when it was synced at that step.
TEST(DpDiLoCo, FragmentsSyncEveryParameterOncePerPeriodAndNeverAllAtOnce) {
  constexpr int kN = 2, kH = 4, kF = 3, kSteps = 3 * kH;
  const size_t sizes[] = {189, 21, 105, 5};
  std::vector<std::vector<std::vector<float>>> snaps(kN);
  std::vector<std::vector<int>> buckets(kN);
  expectRanks(kN, [&](Communicator& c) {
    Mlp m(7);
    dp::Replica rep(c, dilocoOptions(kH, 0.7, 0.9, kF));
    m.registerWith(rep);
    for (int s = 0; s < kSteps; ++s) {
      trainStep(rep, m, 0.1f, 1, [&](int) { return range((s * kN + c.rank()) * 4, 4); });
      snaps[static_cast<size_t>(c.rank())].push_back(m.flat());
      buckets[static_cast<size_t>(c.rank())].push_back(rep.lastMetrics().buckets);
    }
  });
  std::vector<std::vector<int>> syncedAt(4);  // per tensor, the steps it was synced at
  for (int s = 0; s < kSteps; ++s) {
    size_t at = 0;
    int synced = 0;
    for (size_t t = 0; t < 4; ++t) {
      const float* a = snaps[0][static_cast<size_t>(s)].data() + at;
      const float* b = snaps[1][static_cast<size_t>(s)].data() + at;
      if (std::memcmp(a, b, sizes[t] * sizeof(float)) == 0) {
        syncedAt[t].push_back(s + 1);
        synced += 1;
      }
      at += sizes[t];
    }
    EXPECT_LT(synced, 4) << "step " << s + 1 << " synced the whole model";
    EXPECT_EQ(buckets[0][static_cast<size_t>(s)], synced > 0 ? 1 : 0) << "step " << s + 1;
  }
  // Fragments {w1}, {b1}, {w2, b2} (189, 21, 110 values) at step % 4 == 0, 1, 2.
  const std::vector<int> want[] = {{4, 8, 12}, {1, 5, 9}, {2, 6, 10}, {2, 6, 10}};
  for (size_t t = 0; t < 4; ++t) EXPECT_EQ(syncedAt[t], want[t]) << "tensor " << t;
}

TEST(DpDiLoCo, LearnsWithNesterovAndReportsDivergenceBeforeSyncs) {
  constexpr int kN = 3, kH = 4, kSteps = 24;
  std::vector<double> before(kN), after(kN);
  std::vector<std::vector<double>> divergence(kN);
  std::vector<std::vector<float>> final(kN);
  expectRanks(kN, [&](Communicator& c) {
    Mlp m(5);
    dp::Replica rep(c, dilocoOptions(kH, 0.7, 0.9));
    m.registerWith(rep);
    rep.synchronize();
    const size_t r = static_cast<size_t>(c.rank());
    before[r] = m.evalLoss();
    for (int s = 0; s < kSteps; ++s) {
      trainStep(rep, m, 0.2f, 1, [&](int) { return range((s * kN + c.rank()) * 8, 8); });
      divergence[r].push_back(rep.lastMetrics().divergence.value_or(-1));
    }
    after[r] = m.evalLoss();
    final[r] = m.flat();
  });
  for (int r = 0; r < kN; ++r) {
    EXPECT_LT(after[r], 0.5 * before[r]) << "rank " << r;
    EXPECT_EQ(final[static_cast<size_t>(r)], final[0]) << "identical right after a sync";
    EXPECT_EQ(divergence[static_cast<size_t>(r)], divergence[0]);
  }
  for (int s = 0; s < kSteps; ++s) {
    const double d = divergence[0][static_cast<size_t>(s)];
    if ((s + 1) % kH == 0) {
      EXPECT_GT(d, 0.0) << "measured before the sync of step " << s + 1;
      EXPECT_LT(d, 0.5);
    } else {
      EXPECT_EQ(d, -1.0) << "nothing measured at step " << s + 1;
    }
  }
}

TEST(DpDiLoCo, DivergenceLimitIsAnErrorOnEveryRank) {
  auto errors = runRanks(2, [](Communicator& c) {
    Mlp m(5);
    dp::Options o = dilocoOptions(2, 0.7, 0.9);
    o.divergenceLimit = 1e-6;
    dp::Replica rep(c, o);
    m.registerWith(rep);
    for (int s = 0; s < 4; ++s) {
      trainStep(rep, m, 0.2f, 1, [&](int) { return range((s * 2 + c.rank()) * 8, 8); });
    }
  });
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& e : errors)
    EXPECT_NE(e.find("dp step 2, consistency check: divergence"), std::string::npos) << e;
}

TEST(DpDiLoCo, RejectsElasticModeAndBadOptions) {
  expectRanks(1, [](Communicator& c) {
    auto rejects = [&](const std::function<void()>& f, const std::string& what) {
      try {
        f();
      } catch (const Error& e) {
        if (e.code() == ErrorCode::kInvalidArgument &&
            std::string(e.what()).find(what) != std::string::npos) {
          return;
        }
        throw std::runtime_error("wrong error: " + std::string(e.what()));
      }
      throw std::runtime_error("accepted: " + what);
    };
    rejects(
        [] {
          dp::Options o = dilocoOptions(4, 0.7, 0.9);
          o.elastic.enabled = true;
          dp::Replica rep(Communicator::create(makeHashStore(), 0, 1, testOptions()), o);
        },
        "elastic mode supports Mode::kSync only");
    rejects([&] { dp::Replica rep(c, dilocoOptions(0, 0.7, 0.9)); }, "diloco.syncEvery");
    rejects([&] { dp::Replica rep(c, dilocoOptions(4, 0.7, 1.0)); }, "diloco.outerMomentum");
    rejects(
        [&] {
          Mlp m(1);
          dp::Replica rep(c, dilocoOptions(4, 0.7, 0.9, 5));
          m.registerWith(rep);  // 4 tensors
        },
        "diloco.fragments (5) exceeds the number of parameters (4)");
  });
}

}  // namespace
}  // namespace chorus::testing
