// The data-parallel layer over thread-ranks, on a small MLP with analytic gradients: Sync equals
// one process with the global batch, accumulation equals a larger batch, buckets overlap
// backward, the async modes learn, and failures and inconsistencies become errors on every rank.
#include "dp/mlp_model.h"
#include "harness/thread_ranks.h"

#include <gtest/gtest.h>
#include <chorus/dp.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <ostream>
#include <random>
#include <stdexcept>

// What --gtest_list_tests shows after "GetParam() =" (found by argument-dependent lookup).
namespace chorus::dp {
void PrintTo(Mode mode, std::ostream* os) {
  *os << (mode == Mode::kSync ? "sync" : mode == Mode::kDelayed ? "delayed" : "local SGD");
}
}  // namespace chorus::dp

namespace chorus::testing {
namespace {

class DpSync : public ::testing::TestWithParam<int> {};

TEST_P(DpSync, MatchesOneProcessWithTheGlobalBatchAndStaysBitIdentical) {
  const int n = GetParam();
  constexpr int kSteps = 6, kBatch = 4;
  constexpr float kLr = 0.2f;
  std::vector<std::vector<std::vector<float>>> snaps(static_cast<size_t>(n));
  expectRanks(n, [&](Communicator& c) {
    Mlp m(7);
    dp::Replica rep(c, smallBuckets());
    m.registerWith(rep);
    std::mt19937 order(static_cast<uint32_t>(c.rank()) + 100);
    for (int s = 0; s < kSteps; ++s) {
      trainStep(
          rep, m, kLr, 1, [&](int) { return range((s * n + c.rank()) * kBatch, kBatch); }, &order);
      snaps[static_cast<size_t>(c.rank())].push_back(m.flat());
      const dp::StepMetrics& met = rep.lastMetrics();
      if (met.step != s + 1 || met.buckets != 3 || met.bytesReduced != 320 * sizeof(float) ||
          met.bucketsLaunchedEarly != 3) {
        throw std::runtime_error("unexpected metrics at step " + std::to_string(s));
      }
    }
  });
  Mlp ref(7);
  for (int s = 0; s < kSteps; ++s) {
    ref.backward(range(s * n * kBatch, n * kBatch));
    ref.sgd(kLr);
    ref.zeroGrad();
  }
  for (int r = 1; r < n; ++r) {
    for (int s = 0; s < kSteps; ++s) {
      const auto& a = snaps[0][static_cast<size_t>(s)];
      const auto& b = snaps[static_cast<size_t>(r)][static_cast<size_t>(s)];
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
          << "rank " << r << " step " << s;
    }
  }
  expectClose(snaps[0].back(), ref.flat());
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DpSync, ::testing::Values(1, 2, 3, 5),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "n" + std::to_string(i.param);
                         });

TEST(DpAccumulation, KMicroStepsEqualOneStepWithKTimesTheBatch) {
  constexpr int kN = 2, kK = 3, kBatch = 2, kSteps = 4;
  constexpr float kLr = 0.2f;
  std::vector<std::vector<float>> final(kN);
  expectRanks(kN, [&](Communicator& c) {
    Mlp m(3);
    dp::Options o = smallBuckets();
    o.accumulationSteps = kK;
    dp::Replica rep(c, o);
    m.registerWith(rep);
    for (int s = 0; s < kSteps; ++s) {
      trainStep(rep, m, kLr, kK, [&](int micro) {
        if (micro < kK - 1 && rep.launchedBuckets() != 0) throw std::runtime_error("sent early");
        return range(s * kN * kK * kBatch + (micro * kN + c.rank()) * kBatch, kBatch);
      });
    }
    final[static_cast<size_t>(c.rank())] = m.flat();
  });
  Mlp ref(3);
  for (int s = 0; s < kSteps; ++s) {
    ref.backward(range(s * kN * kK * kBatch, kN * kK * kBatch));
    ref.sgd(kLr);
    ref.zeroGrad();
  }
  EXPECT_EQ(final[0], final[1]);
  expectClose(final[0], ref.flat());
}

TEST(DpBuckets, SmallModelsStillGetSeveralBuckets) {
  expectRanks(1, [](Communicator& c) {
    Mlp m(1);
    dp::Options o;  // 25 MiB buckets would hold this whole model
    o.log = [](const std::string&) {};
    dp::Replica rep(c, o);
    m.registerWith(rep);
    size_t total = 0;
    for (const auto& b : rep.buckets()) total += b.bytes;
    if (rep.buckets().size() < 2) throw std::runtime_error("one bucket for the whole model");
    for (const auto& b : rep.buckets()) {
      // Over total / minBuckets only as a single tensor that large.
      if (b.bytes > total / 4 && b.params.size() != 1) throw std::runtime_error("bucket too big");
    }
    o.minBuckets = 0;
    dp::Replica one(c, o);
    m.registerWith(one);
    if (one.buckets().size() != 1) throw std::runtime_error("minBuckets = 0 still split");
  });
}

TEST(DpBuckets, FuseSmallTensorsAndLaunchInOrderAsSoonAsReady) {
  expectRanks(2, [](Communicator& c) {
    Mlp m(1);
    dp::Replica rep(c, smallBuckets());
    m.registerWith(rep);
    const auto& b = rep.buckets();
    if (b.size() != 3 || b[0].params != std::vector<size_t>{3, 2} || !b[0].fused ||
        b[0].bytes != 440 || b[1].params != std::vector<size_t>{1} || b[2].bytes != 756) {
      throw std::runtime_error("unexpected bucket layout");
    }
    auto expectLaunched = [&](size_t n) {
      if (rep.launchedBuckets() != n) {
        throw std::runtime_error("launched " + std::to_string(rep.launchedBuckets()) +
                                 ", expected " + std::to_string(n));
      }
    };
    rep.beginStep();
    m.backward(range(0, 4));
    rep.gradientReady(0);  // w1: bucket 2 is complete, but buckets 0 and 1 must go first
    expectLaunched(0);
    rep.gradientReady(3);
    expectLaunched(0);
    rep.gradientReady(2);  // completes bucket 0: it goes out now, before waitGradients
    expectLaunched(1);
    rep.gradientReady(1);  // completes bucket 1, which releases bucket 2 too
    expectLaunched(3);
    rep.waitGradients();
    m.sgd(0.1f);
    rep.afterOptimizerStep();
    const auto& met = rep.lastMetrics();
    if (met.bucketsLaunchedEarly != 3 || met.commSeconds <= 0 || met.computeSeconds <= 0 ||
        met.exposedCommSeconds > met.commSeconds) {
      throw std::runtime_error("unexpected metrics");
    }
  });
}

TEST(DpAsync, DelayedAppliesThePreviousStepAndLearns) {
  constexpr int kN = 3, kSteps = 40, kBatch = 8;
  std::vector<double> before(kN), after(kN);
  expectRanks(kN, [&](Communicator& c) {
    Mlp m(5);
    dp::Options o = smallBuckets();
    o.mode = dp::Mode::kDelayed;
    dp::Replica rep(c, o);  // checkEvery = 1: ranks stay bit-identical
    m.registerWith(rep);
    const auto initial = m.flat();
    const size_t r = static_cast<size_t>(c.rank());
    before[r] = m.evalLoss();
    for (int s = 0; s < kSteps; ++s) {
      trainStep(rep, m, 0.2f, 1, [&](int) { return range((s * kN + c.rank()) * kBatch, kBatch); });
      if (s == 0 && m.flat() != initial) throw std::runtime_error("first step applied something");
    }
    after[r] = m.evalLoss();
  });
  for (int r = 0; r < kN; ++r) EXPECT_LT(after[r], 0.5 * before[r]) << "rank " << r;
}

TEST(DpAsync, LocalSgdLearnsAndItsDivergenceIsBounded) {
  constexpr int kN = 3, kSteps = 24, kBatch = 8, kPeriod = 4;
  std::vector<double> before(kN), after(kN);
  std::vector<std::vector<double>> divergence(kN);
  expectRanks(kN, [&](Communicator& c) {
    Mlp m(5);
    dp::Options o = smallBuckets();
    o.mode = dp::Mode::kLocalSgd;
    o.localSgdPeriod = kPeriod;
    dp::Replica rep(c, o);
    m.registerWith(rep);
    const size_t r = static_cast<size_t>(c.rank());
    before[r] = m.evalLoss();
    for (int s = 0; s < kSteps; ++s) {
      trainStep(rep, m, 0.2f, 1, [&](int) { return range((s * kN + c.rank()) * kBatch, kBatch); });
      divergence[r].push_back(rep.lastMetrics().divergence.value_or(-1));
    }
    after[r] = m.evalLoss();
  });
  for (int r = 0; r < kN; ++r) {
    EXPECT_LT(after[r], 0.7 * before[r]) << "rank " << r;
    EXPECT_EQ(divergence[r], divergence[0]);
  }
  for (int s = 0; s < kSteps; ++s) {
    const double d = divergence[0][static_cast<size_t>(s)];
    if ((s + 1) % kPeriod == 0) {
      EXPECT_EQ(d, 0.0) << "step " << s + 1 << " right after averaging";
    } else {
      EXPECT_GT(d, 0.0) << "step " << s + 1;
      EXPECT_LT(d, 0.5) << "step " << s + 1;
    }
  }
}

TEST(DpAsync, DivergenceLimitIsAnErrorOnEveryRank) {
  auto errors = runRanks(3, [](Communicator& c) {
    Mlp m(5);
    dp::Options o = smallBuckets();
    o.mode = dp::Mode::kLocalSgd;
    o.divergenceLimit = 1e-6;
    dp::Replica rep(c, o);
    m.registerWith(rep);
    for (int s = 0; s < 3; ++s) {
      trainStep(rep, m, 0.2f, 1, [&](int) { return range((s * 3 + c.rank()) * 8, 8); });
    }
  });
  ASSERT_EQ(errors.size(), 3u);
  for (const auto& e : errors)
    EXPECT_NE(e.find("dp step 1, consistency check: divergence"), std::string::npos) << e;
}

TEST(DpCheck, CorruptedParameterIsNamedOnEveryRank) {
  std::vector<ErrorCode> codes(3, ErrorCode::kOk);
  auto errors = runRanks(3, [&](Communicator& c) {
    Mlp m(2);
    dp::Replica rep(c, smallBuckets());
    m.registerWith(rep);
    try {
      for (int s = 0; s < 5; ++s) {
        rep.beginStep();
        m.backward(range((s * 3 + c.rank()) * 4, 4));
        rep.waitGradients();  // reports every gradient ready itself
        m.sgd(0.1f);
        if (s == 2 && c.rank() == 2) m.w1[17] += 1e-3f;
        rep.afterOptimizerStep();
        m.zeroGrad();
      }
    } catch (const Error& e) {
      codes[static_cast<size_t>(c.rank())] = e.code();
      throw;
    }
  });
  ASSERT_EQ(errors.size(), 3u);
  for (const auto& e : errors) {
    EXPECT_NE(e.find("dp step 3, consistency check: parameters on rank(s) 2 differ from rank 0's"),
              std::string::npos)
        << e;
  }
  for (ErrorCode code : codes) EXPECT_EQ(code, ErrorCode::kMismatch);
}

// Delayed: the throwing rank still has the previous step's all-reduces in flight, so its
// Replica aborts the communicator while unwinding.
class DpFailure : public ::testing::TestWithParam<dp::Mode> {};

TEST_P(DpFailure, RankThrowingMidTrainingStopsEveryOtherRank) {
  const dp::Mode mode = GetParam();
  const auto t0 = std::chrono::steady_clock::now();
  auto errors = runRanks(
      3,
      [mode](Communicator& c) {
        Mlp m(2);
        dp::Options o = smallBuckets();
        o.mode = mode;
        dp::Replica rep(c, o);
        m.registerWith(rep);
        for (int s = 0; s < 6; ++s) {
          trainStep(rep, m, 0.1f, 1, [&](int) {
            if (s == 2 && c.rank() == 1) throw std::runtime_error("injected failure");
            return range((s * 3 + c.rank()) * 4, 4);
          });
        }
      },
      testOptions(std::chrono::milliseconds(2000)));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(errors.size(), 3u);
  for (const auto& e : errors) {
    if (e.rfind("rank 1:", 0) == 0) {
      EXPECT_NE(e.find("injected failure"), std::string::npos) << e;
    } else {
      // Sync fails in step 3's buckets; Delayed may fail applying step 2's.
      EXPECT_NE(e.find(mode == dp::Mode::kSync ? ": dp step 3, bucket " : ": dp step "),
                std::string::npos)
          << e;
    }
  }
  EXPECT_LT(seconds, 15.0);
}

INSTANTIATE_TEST_SUITE_P(Modes, DpFailure, ::testing::Values(dp::Mode::kSync, dp::Mode::kDelayed),
                         [](const ::testing::TestParamInfo<dp::Mode>& i) {
                           return i.param == dp::Mode::kSync ? "Sync" : "Delayed";
                         });

TEST(DpBroadcast, MakesDifferentlyInitialisedRanksIdentical) {
  constexpr int kN = 5;
  std::vector<std::vector<float>> got(kN);
  expectRanks(kN, [&](Communicator& c) {
    Mlp m(static_cast<uint32_t>(40 + c.rank()));
    dp::Replica rep(c, smallBuckets());
    m.registerWith(rep);
    rep.broadcastParameters(0);
    got[static_cast<size_t>(c.rank())] = m.flat();
  });
  const auto want = Mlp(40).flat();
  for (int r = 0; r < kN; ++r) EXPECT_EQ(got[static_cast<size_t>(r)], want) << "rank " << r;
}

}  // namespace
}  // namespace chorus::testing
