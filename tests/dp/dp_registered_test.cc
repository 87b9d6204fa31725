// Bucket buffers in registered memory: on one host the Replica's flat buckets (and the gradients
// it holds, addParameter with a null grad) are registered, so their all-reduces run in place;
// the averages stay exact and identical to those of caller-owned gradients, compressed buckets
// keep their wire format, and across hosts everything takes the usual path.
#include "algo/in_place.h"
#include "harness/thread_ranks.h"

#include <gtest/gtest.h>
#include <chorus/dp.hpp>

#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace chorus::testing {
namespace {

constexpr int kRanks = 4, kSteps = 3;
// With 300 KB buckets: {w2} alone, {w1, w0} fused; both over the in-place threshold below.
const std::vector<size_t> kCounts = {30000, 20000, 70000};

// Calls from 64 KiB run in place here (the library's threshold is larger: smaller tensors keep
// the test short).
class DpRegistered : public ::testing::Test {
 protected:
  void SetUp() override { algo::setInPlaceMinBytesForTesting(64 * 1024); }
  void TearDown() override { algo::setInPlaceMinBytesForTesting(0); }
};

// Rank r's gradient element j at step s: small integers, so that every sum and the average
// over 4 ranks are exact in f32 whatever the order of the additions.
float gradientOf(int rank, int step, size_t tensor, size_t j) {
  return static_cast<float>((rank + 1) * static_cast<int>((j + tensor + step) % 7 + 1));
}
float averageOf(int step, size_t tensor, size_t j, int ranks) {
  float sum = 0;
  for (int r = 0; r < ranks; ++r) sum += gradientOf(r, step, tensor, j);
  return sum / static_cast<float>(ranks);
}

struct Run {
  bool held = true;  // the Replica holds the gradients
  dp::CompressionOptions compression{};
  dp::Mode mode = dp::Mode::kSync;
};

// Runs kSteps Sync steps on `c`; returns each step's averaged gradients, concatenated.
std::vector<float> train(Communicator& c, const Run& run) {
  dp::Options o;
  o.bucketBytes = 300 * 1000;
  o.minBuckets = 0;
  o.compression = run.compression;
  o.mode = run.mode;
  dp::Replica rep(c, o);
  std::vector<std::vector<float>> values, owned;
  for (size_t t = 0; t < kCounts.size(); ++t) {
    values.emplace_back(kCounts[t], 0.5f);
    owned.emplace_back(kCounts[t], 0.0f);
    rep.addParameter("w" + std::to_string(t), values[t].data(),
                     run.held ? nullptr : owned[t].data(), kCounts[t]);
  }
  rep.finalize();
  if (rep.buckets().size() != 2) throw std::runtime_error("expected 2 buckets");
  std::vector<float> seen;
  for (int s = 0; s < kSteps; ++s) {
    rep.beginStep();
    for (size_t t = kCounts.size(); t-- > 0;) {  // backward: the last layer first
      float* g = rep.gradient(t);
      if (run.held == (g == owned[t].data())) throw std::runtime_error("gradient(t) misplaced");
      for (size_t j = 0; j < kCounts[t]; ++j) g[j] += gradientOf(c.rank(), s, t, j);
      rep.gradientReady(t);
    }
    if (!rep.waitGradients()) throw std::runtime_error("waitGradients returned false");
    for (size_t t = 0; t < kCounts.size(); ++t) {
      float* g = rep.gradient(t);
      seen.insert(seen.end(), g, g + kCounts[t]);
      std::fill(g, g + kCounts[t], 0.0f);  // zero_grad
    }
    rep.afterOptimizerStep();
  }
  return seen;
}

std::vector<float> exactAverages(int ranks) {
  std::vector<float> want;
  for (int s = 0; s < kSteps; ++s) {
    for (size_t t = 0; t < kCounts.size(); ++t) {
      for (size_t j = 0; j < kCounts[t]; ++j) want.push_back(averageOf(s, t, j, ranks));
    }
  }
  return want;
}

void expectBitIdentical(const std::vector<std::vector<float>>& got, const std::vector<float>& want,
                        const std::string& what) {
  for (size_t r = 0; r < got.size(); ++r) {
    ASSERT_EQ(got[r].size(), want.size()) << what << ", rank " << r;
    EXPECT_EQ(std::memcmp(got[r].data(), want.data(), want.size() * sizeof(float)), 0)
        << what << ": rank " << r << " differs from the exact average";
  }
}

TEST_F(DpRegistered, HeldGradientsAreAveragedInPlaceAndExactly) {
  std::vector<std::vector<float>> got(kRanks);
  const uint64_t before = algo::inPlaceRunCount();
  expectRanks(kRanks, [&](Communicator& c) { got[static_cast<size_t>(c.rank())] = train(c, {}); });
  // Both buckets of every step on every rank ran in place.
  EXPECT_EQ(algo::inPlaceRunCount() - before, uint64_t{2 * kSteps * kRanks});
  expectBitIdentical(got, exactAverages(kRanks), "held gradients, one host");
}

TEST_F(DpRegistered, CallerGradientsUseRegisteredFusedBucketsOnly) {
  std::vector<std::vector<float>> got(kRanks);
  const uint64_t before = algo::inPlaceRunCount();
  expectRanks(kRanks, [&](Communicator& c) {
    got[static_cast<size_t>(c.rank())] = train(c, {.held = false});
  });
  // The fused bucket's flat buffer is registered; w2 is reduced in the caller's (heap) buffer.
  EXPECT_EQ(algo::inPlaceRunCount() - before, uint64_t{kSteps * kRanks});
  expectBitIdentical(got, exactAverages(kRanks), "caller's gradients, one host");
}

TEST_F(DpRegistered, AcrossHostsNothingRunsInPlace) {
  std::vector<std::vector<float>> got(kRanks);
  const uint64_t before = algo::inPlaceRunCount();
  expectRanksOn({"a", "a", "b", "b"},
                [&](Communicator& c) { got[static_cast<size_t>(c.rank())] = train(c, {}); });
  EXPECT_EQ(algo::inPlaceRunCount(), before);
  expectBitIdentical(got, exactAverages(kRanks), "held gradients, two hosts");
}

// A wire format is applied by the ring: compressed buckets stay unregistered, so held and
// caller-owned gradients give the same rounded averages, bit for bit, and nothing runs in place.
TEST_F(DpRegistered, CompressedBucketsKeepTheirWireFormat) {
  dp::CompressionOptions bf16;
  bf16.kind = dp::Compression::kBf16;
  std::vector<std::vector<float>> held(kRanks), caller(kRanks);
  const uint64_t before = algo::inPlaceRunCount();
  expectRanks(kRanks, [&](Communicator& c) {
    held[static_cast<size_t>(c.rank())] = train(c, {.held = true, .compression = bf16});
    caller[static_cast<size_t>(c.rank())] = train(c, {.held = false, .compression = bf16});
  });
  EXPECT_EQ(algo::inPlaceRunCount(), before);
  expectBitIdentical(held, caller[0], "bf16, held against caller's");
  expectBitIdentical(caller, caller[0], "bf16, caller's");
}

// Delayed reduces copies of the gradients (two registered buffers per bucket) and applies the
// previous step's average: the same whoever holds the gradients.
TEST_F(DpRegistered, DelayedGivesTheSameAveragesWithHeldGradients) {
  std::vector<std::vector<float>> held(kRanks), caller(kRanks);
  const uint64_t before = algo::inPlaceRunCount();
  expectRanks(kRanks, [&](Communicator& c) {
    held[static_cast<size_t>(c.rank())] = train(c, {.mode = dp::Mode::kDelayed});
    caller[static_cast<size_t>(c.rank())] = train(c, {.held = false, .mode = dp::Mode::kDelayed});
  });
  EXPECT_EQ(algo::inPlaceRunCount() - before, uint64_t{2 * 2 * kSteps * kRanks});
  // Step s applies step s - 1's exact average (zeros at the first).
  std::vector<float> want(exactAverages(kRanks).size() / kSteps, 0.0f);
  const std::vector<float> exact = exactAverages(kRanks);
  want.insert(want.end(), exact.begin(), exact.end() - static_cast<long>(want.size()));
  expectBitIdentical(held, want, "delayed, held gradients");
  expectBitIdentical(caller, want, "delayed, caller's gradients");
}

// Elastic mode keeps its buckets on the heap: a membership change replaces the communicator, and
// held gradients keep their address across it; the survivors' averages stay exact.
TEST_F(DpRegistered, ElasticShrinkKeepsHeldGradientsInPlaceAndExact) {
  auto store = makeHashStore();
  std::vector<std::vector<float>> seen(3);
  std::vector<int> changes(3, 0);
  std::vector<std::string> errors;
  std::mutex mu;
  const uint64_t before = algo::inPlaceRunCount();
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      try {
        dp::Options o;
        o.bucketBytes = 300 * 1000;
        o.minBuckets = 0;
        o.elastic.enabled = true;
        dp::Replica rep(Communicator::create(store, r, 3, testOptions()), o);
        std::vector<std::vector<float>> values;
        for (size_t t = 0; t < kCounts.size(); ++t) {
          values.emplace_back(kCounts[t], 0.5f);
          rep.addParameter("w" + std::to_string(t), values[t].data(), nullptr, kCounts[t]);
        }
        rep.finalize();
        rep.synchronize();
        if (r == 1) return;  // gone before the first step: its communicator closes
        std::vector<float*> where;
        for (size_t t = 0; t < kCounts.size(); ++t) where.push_back(rep.gradient(t));
        for (int s = 0; s < kSteps;) {
          const int rank = rep.communicator().rank();
          try {
            rep.beginStep();
            for (size_t t = kCounts.size(); t-- > 0;) {
              float* g = rep.gradient(t);
              if (g != where[t]) throw std::runtime_error("a held gradient moved");
              for (size_t j = 0; j < kCounts[t]; ++j) g[j] += gradientOf(rank, s, t, j);
              rep.gradientReady(t);
            }
            rep.waitGradients();
          } catch (const dp::MembershipChanged&) {
            ++changes[static_cast<size_t>(r)];
            continue;  // the step is redone by the survivors, from zero gradients
          }
          for (size_t t = 0; t < kCounts.size(); ++t) {
            float* g = rep.gradient(t);
            seen[static_cast<size_t>(r)].insert(seen[static_cast<size_t>(r)].end(), g,
                                                g + kCounts[t]);
            std::fill(g, g + kCounts[t], 0.0f);
          }
          rep.afterOptimizerStep();
          ++s;
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_EQ(algo::inPlaceRunCount(), before);
  EXPECT_EQ(changes, (std::vector<int>{1, 0, 1}));
  expectBitIdentical({seen[0], seen[2]}, exactAverages(2), "survivors after the shrink");
}

}  // namespace
}  // namespace chorus::testing
