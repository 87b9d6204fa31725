// Cheap one-off traffic of the dp layer: synchronize() compares content hashes and copies the
// state only when the ranks differ; the divergence of LocalSgd and DiLoCo is twice the largest
// distance of a rank's values from the ranks' average, DiLoCo's taken from the pseudo-gradients
// its sync all-reduces anyway plus one scalar.
#include "dp/consistency.h"
#include "dp/diloco.h"
#include "dp/mlp_model.h"
#include "harness/thread_ranks.h"

#include <gtest/gtest.h>
#include <chorus/dp.hpp>

#include <cmath>
#include <cstring>
#include <mutex>

namespace chorus::testing {
namespace {

constexpr size_t kStateFloats = 1 << 16;  // 256 KiB: a copy would show in bytesSent

// A Replica over the test MLP with optimizer-like state: `extra` floats and a counter.
struct Job {
  Mlp m;
  std::vector<float> moments = std::vector<float>(kStateFloats, 0.25f);
  int64_t position[2] = {1, 0};
  dp::Replica rep;

  Job(Communicator& c, uint32_t seed) : m(seed), rep(c, smallBuckets()) {
    m.registerWith(rep);
    rep.addState("moments", moments.data(), moments.size());
    rep.addState("position", position, 2);
  }
  std::vector<float> bits() {
    std::vector<float> all = m.flat();
    all.insert(all.end(), moments.begin(), moments.end());
    return all;
  }
};

void expectSameBits(const std::vector<float>& a, const std::vector<float>& b,
                    const std::string& who) {
  ASSERT_EQ(a.size(), b.size()) << who;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << who;
}

TEST(DpStateCheck, IdenticalStartSendsOnlyTheHashes) {
  constexpr int kN = 3;
  std::vector<uint64_t> sent(kN), again(kN);
  std::vector<std::vector<float>> before(kN), after(kN);
  expectRanks(kN, [&](Communicator& c) {
    const auto r = static_cast<size_t>(c.rank());
    Job j(c, 7);  // the same seed everywhere: identical parameters and state
    before[r] = j.bits();
    const uint64_t s0 = c.bytesSent();
    j.rep.synchronize();
    const uint64_t s1 = c.bytesSent();
    j.rep.synchronize();  // later calls check the same way
    again[r] = c.bytesSent() - s1;
    sent[r] = s1 - s0;
    after[r] = j.bits();
  });
  for (size_t r = 0; r < kN; ++r) {
    // The all-gather of 4 int64 per rank: (N - 1) * 32 bytes per rank; a copy would be > 256 KiB.
    EXPECT_LE(sent[r], 256u) << "rank " << r;
    EXPECT_LE(again[r], 256u) << "rank " << r;
    expectSameBits(after[r], before[r], "rank " + std::to_string(r) + " unchanged");
  }
}

TEST(DpStateCheck, DifferentStartEndsBitIdenticalToTheSource) {
  constexpr int kN = 3;
  std::vector<uint64_t> sent(kN);
  std::vector<std::vector<float>> before(kN), after(kN);
  std::vector<int64_t> positions(kN);
  expectRanks(kN, [&](Communicator& c) {
    const auto r = static_cast<size_t>(c.rank());
    Job j(c, 7);
    if (r == 2) j.moments[kStateFloats - 1] = 0.5f;  // one bit pattern differs, on one rank
    if (r == 0) j.position[1] = 42;
    before[r] = j.bits();
    const uint64_t s0 = c.bytesSent();
    j.rep.synchronize();
    sent[r] = c.bytesSent() - s0;
    after[r] = j.bits();
    positions[r] = j.position[1];
  });
  EXPECT_GE(sent[0], kStateFloats * sizeof(float)) << "rank 0 sent its state";
  for (size_t r = 0; r < kN; ++r) {
    expectSameBits(after[r], before[0], "rank " + std::to_string(r) + " holds rank 0's state");
    EXPECT_EQ(positions[r], 42) << "rank " << r;
  }
}

// A checkpoint restored on one rank makes it the most advanced: its state and step go to all.
// Restored on every rank with the same content: nothing travels, the step stays.
TEST(DpStateCheck, RestoredStepIsCopiedOnlyWhereItDiffers) {
  for (bool everywhere : {false, true}) {
    constexpr int kN = 2;
    std::vector<uint64_t> sent(kN);
    std::vector<int64_t> steps(kN);
    std::vector<std::vector<float>> after(kN);
    expectRanks(kN, [&](Communicator& c) {
      const auto r = static_cast<size_t>(c.rank());
      Job j(c, 7);
      if (everywhere || r == 1) j.rep.restoreStep(5);
      const uint64_t s0 = c.bytesSent();
      j.rep.synchronize();
      sent[r] = c.bytesSent() - s0;
      steps[r] = j.rep.step();
      after[r] = j.bits();
    });
    for (size_t r = 0; r < kN; ++r) {
      EXPECT_EQ(steps[r], 5) << "rank " << r << (everywhere ? ", restored everywhere" : "");
      expectSameBits(after[r], after[0], "rank " + std::to_string(r));
    }
    if (everywhere) {
      EXPECT_LE(sent[0] + sent[1], 512u);
    } else {
      EXPECT_GE(sent[1], kStateFloats * sizeof(float)) << "rank 1 (restored) is the source";
    }
  }
}

// Known values. Old definition: max over elements of (max over ranks - min over ranks).
TEST(DpStateCheck, DivergenceOfKnownValues) {
  // Two ranks: exactly the old definition. Element 2 differs by 0.75, element 0 by 0.25.
  expectRanks(2, [](Communicator& c) {
    std::vector<float> x = {1.0f, -2.0f, 0.5f, 3.0f};
    if (c.rank() == 1) x[0] += 0.25f, x[2] -= 0.75f;
    const double d = dp::measureDivergence(c, {{x.data(), x.size()}});
    if (d != 0.75) throw std::runtime_error("two ranks: " + std::to_string(d) + ", want 0.75");
  });
  // Three ranks at 0, 0 and 3 (one element): mean 1, distances 1, 1, 2: 2 * 2 = 4, where the
  // old definition gives 3 (for more than two ranks, between max - min and twice that).
  expectRanks(3, [](Communicator& c) {
    std::vector<float> x = {0.5f, c.rank() == 2 ? 3.0f : 0.0f};
    const double d = dp::measureDivergence(c, {{x.data(), x.size()}});
    if (std::fabs(d - 4.0) > 1e-6) throw std::runtime_error("three ranks: " + std::to_string(d));
  });
}

// DiLoCo's divergence comes from its pseudo-gradients; at a sync it must equal the old
// definition over the parameters as they were before that sync (2 ranks). The log line is
// written before the outer step, so the parameters seen there are the ones measured.
TEST(DpStateCheck, DiLoCoDivergenceFromThePseudoGradientsMatchesTheParameters) {
  constexpr int kN = 2, kH = 3, kSteps = 9;
  std::mutex mu;
  std::vector<std::vector<std::vector<float>>> seen(kN);  // per rank, per log line
  std::vector<std::vector<double>> reported(kN);
  std::vector<std::vector<uint64_t>> sent(kN);
  expectRanks(kN, [&](Communicator& c) {
    const auto r = static_cast<size_t>(c.rank());
    Mlp m(5);
    dp::Options o = smallBuckets();
    o.mode = dp::Mode::kDiLoCo;
    o.diloco.syncEvery = kH;
    o.log = [&](const std::string&) {
      std::lock_guard<std::mutex> lock(mu);
      seen[r].push_back(m.flat());
    };
    dp::Replica rep(c, o);
    m.registerWith(rep);
    rep.synchronize();
    for (int s = 0; s < kSteps; ++s) {
      trainStep(rep, m, 0.2f, 1, [&](int) { return range((s * kN + c.rank()) * 8, 8); });
      if (rep.lastMetrics().divergence) {
        reported[r].push_back(*rep.lastMetrics().divergence);
        sent[r].push_back(rep.lastMetrics().bytesSent);
      }
    }
  });
  ASSERT_EQ(reported[0].size(), static_cast<size_t>(kSteps / kH));
  ASSERT_EQ(seen[0].size(), reported[0].size());
  ASSERT_EQ(seen[1].size(), reported[0].size());
  for (size_t k = 0; k < reported[0].size(); ++k) {
    double want = 0;
    for (size_t i = 0; i < seen[0][k].size(); ++i) {
      want = std::max(want, std::fabs(double(seen[0][k][i]) - double(seen[1][k][i])));
    }
    EXPECT_GT(want, 0.0) << "sync " << k << ": the ranks had drifted";
    EXPECT_EQ(reported[1][k], reported[0][k]);
    // Pseudo-gradients and their average are f32: a few roundings of values below 1.
    EXPECT_NEAR(reported[0][k], want, 1e-6 + 1e-4 * want) << "sync " << k;
    // The sync (320 floats, 2 ranks: 1280 bytes) and the scalar, no model-sized measurement.
    EXPECT_LE(sent[0][k], 1280u + 256u) << "sync " << k;
  }
}

}  // namespace
}  // namespace chorus::testing
