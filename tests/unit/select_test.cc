// The cost-model selector: pure, deterministic, honours forced choices per collective, explains
// itself, and reads tuning files.
#include "algo/select.h"
#include "algo/collectives.h"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

namespace chorus::algo {
namespace {

const Placement kOneRankPerHost{8, 1, true, true};
const Options kDefaultOptions;  // named: GCC 12 -O3 warns about temporaries' strings

AlgorithmId pick(size_t bytes, int n, const Placement& w, const Options& o) {
  return chooseAlgorithm(CollectiveKind::kAllReduce, bytes, DataType::kF32, n, w, o).algo;
}
AlgorithmId pick(size_t bytes, int n, const Placement& w) {
  return pick(bytes, n, w, kDefaultOptions);
}

Placement spread(int n) { return Placement{n, 1, true, true}; }

TEST(Select, ChoosesTheCheapestPredictionOrTheRingWithinTenPercent) {
  Options o;
  int ringByMargin = 0;
  for (int n : {2, 3, 5, 8, 64, 1024}) {
    for (size_t bytes : {size_t{8}, size_t{4096}, size_t{1} << 20, size_t{256} << 20}) {
      Choice c =
          chooseAlgorithm(CollectiveKind::kAllReduce, bytes, DataType::kF32, n, spread(n), o);
      ASSERT_FALSE(c.candidates.empty());
      const double best = c.candidates.front().seconds;
      if (c.algo != c.candidates.front().algo) {
        // Only the ring may be preferred to the cheapest prediction, and only within 10%.
        EXPECT_EQ(c.algo, AlgorithmId::kRing) << n << " ranks, " << bytes << " B";
        for (const auto& k : c.candidates) {
          if (k.algo == AlgorithmId::kRing) {
            EXPECT_LE(k.seconds, best * 1.10);
          }
        }
        ++ringByMargin;
      } else if (c.algo != AlgorithmId::kRing) {
        for (const auto& k : c.candidates) {
          if (k.algo == AlgorithmId::kRing) {
            EXPECT_GT(k.seconds, best * 1.10);
          }
        }
      }
      for (size_t i = 1; i < c.candidates.size(); ++i) {
        EXPECT_LE(c.candidates[i - 1].seconds, c.candidates[i].seconds);
      }
      // The hierarchical algorithm is no candidate on a flat layout.
      for (const auto& k : c.candidates) EXPECT_NE(k.algo, AlgorithmId::kHierarchical);
    }
  }
  // Large buffers on few ranks are where the ring is close to halving-doubling's prediction.
  EXPECT_GT(ringByMargin, 0);
}

TEST(Select, LatencyBoundSmallBandwidthBoundLarge) {
  // Across hosts: few rounds for tiny buffers, a bandwidth-optimal algorithm for large ones.
  for (int n : {4, 8}) {
    AlgorithmId small = pick(8, n, spread(n));
    EXPECT_TRUE(small == AlgorithmId::kRecursiveDoubling || small == AlgorithmId::kOneShot)
        << toString(small);
    // Bandwidth-optimal: 2 (N-1)/N of the buffer each way per rank.
    AlgorithmId large = pick(256u << 20, n, spread(n));
    EXPECT_TRUE(large == AlgorithmId::kRing || large == AlgorithmId::kHalvingDoubling ||
                large == AlgorithmId::kTwoShot)
        << toString(large);
  }
  // At scale the ring's 2(N-1) latencies lose at mid sizes.
  EXPECT_NE(pick(64u << 10, 1024, spread(1024)), AlgorithmId::kRing);
  // A group of one needs nothing.
  EXPECT_EQ(pick(1 << 20, 1, spread(1)), AlgorithmId::kNone);
}

TEST(Select, HierarchicalOnlyWhereHostsHoldSeveralRanks) {
  const Placement layered{2, 4, true, true};
  EXPECT_EQ(pick(64u << 20, 8, layered), AlgorithmId::kHierarchical);
  Options o;
  o.algorithm = parseAlgorithmSetting("hier");
  EXPECT_EQ(pick(8, 8, layered, o), AlgorithmId::kHierarchical);
  EXPECT_THROW(pick(8, 8, kOneRankPerHost, o), Error);
  EXPECT_THROW(pick(8, 4, Placement{1, 4, true, true}, o), Error);
}

TEST(Select, TheTuningDrivesTheChoice) {
  // With an enormous per-message cost, the fewest rounds win even for large buffers (one round
  // of messages to everyone); with free messages, the least data per rank does.
  Options slow;
  slow.tuning.net.alpha = 10.0;
  AlgorithmId fewest = pick(1 << 20, 8, kOneRankPerHost, slow);
  EXPECT_TRUE(fewest == AlgorithmId::kOneShot || fewest == AlgorithmId::kRecursiveDoubling)
      << toString(fewest);
  Options cheap;
  cheap.tuning.net.alpha = 0;
  AlgorithmId a = pick(1 << 20, 8, kOneRankPerHost, cheap);
  EXPECT_TRUE(a == AlgorithmId::kHalvingDoubling || a == AlgorithmId::kTwoShot ||
              a == AlgorithmId::kRing)
      << toString(a);
}

TEST(Select, ForcedPerCollective) {
  Options o;
  o.algorithm = parseAlgorithmSetting("tree");  // a bare name is the all-reduce's
  EXPECT_EQ(pick(8, 5, spread(5), o), AlgorithmId::kDoubleTree);
  // The other collectives keep the automatic choice.
  const Choice b = chooseAlgorithm(CollectiveKind::kBroadcast, 8, DataType::kU8, 5, spread(5), o);
  EXPECT_FALSE(b.forced);
  EXPECT_EQ(b.algo,
            chooseAlgorithm(CollectiveKind::kBroadcast, 8, DataType::kU8, 5, spread(5), {}).algo);
  o.algorithm = parseAlgorithmSetting("broadcast=chain, allreduce=rhd");
  Choice c = chooseAlgorithm(CollectiveKind::kAllReduce, 8, DataType::kF32, 3, spread(3), o);
  EXPECT_TRUE(c.forced);
  EXPECT_EQ(c.algo, AlgorithmId::kHalvingDoubling);
  o.algorithm = parseAlgorithmSetting("reduce_scatter=ring,allreduce=auto");
  EXPECT_FALSE(
      chooseAlgorithm(CollectiveKind::kAllReduce, 8, DataType::kF32, 3, spread(3), o).forced);
  EXPECT_EQ(forcedAlgorithm(CollectiveKind::kReduceScatter, o.algorithm), AlgorithmId::kRing);
  EXPECT_EQ(forcedAlgorithm(CollectiveKind::kAllGather, parseAlgorithmSetting("allgather=ring")),
            AlgorithmId::kRing);
  EXPECT_FALSE(forcedAlgorithm(CollectiveKind::kAllReduce, parseAlgorithmSetting("auto")));
}

TEST(Select, UnsupportedForcedChoicesAreClearErrors) {
  for (const char* bad : {"fastest", "allgather=tree", "broadcast=rhd", "reduce=ring",
                          "barrier=ring", "allreduce=chain"}) {
    SCOPED_TRACE(bad);
    try {
      (void)parseAlgorithmSetting(bad);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("CHORUS_ALGO"), std::string::npos) << e.what();
    }
  }
  try {
    (void)parseAlgorithmSetting("all_gather=tree");
    ADD_FAILURE() << "all_gather=tree accepted";
  } catch (const Error& e) {
    // Names the collective and what it can do instead.
    EXPECT_NE(std::string(e.what()).find("all_gather"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ring"), std::string::npos) << e.what();
  }
  for (const char* good :
       {"auto", "ring", "allreduce=oneshot,broadcast=chain", "barrier=dissemination"}) {
    EXPECT_NO_THROW(validateAlgorithmSetting(parseAlgorithmSetting(good))) << good;
  }
  // A setting assembled in code is checked the same way (creation calls this).
  AlgorithmSetting s;
  s[Collective::kBroadcast] = Algorithm::kRing;
  try {
    validateAlgorithmSetting(s);
    ADD_FAILURE() << "broadcast=ring accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("broadcast has no algorithm 'ring'"), std::string::npos)
        << e.what();
  }
  s[Collective::kBroadcast] = static_cast<Algorithm>(99);
  EXPECT_THROW(validateAlgorithmSetting(s), Error);
}

TEST(Select, ExplainsItsChoice) {
  OpDesc d;
  d.kind = CollectiveKind::kAllReduce;
  d.dtype = DataType::kF32;
  d.count = 256;
  d.seq = OpDesc::collectiveSeq(7);
  const Placement w{2, 2, true, true};
  Choice c = chooseAlgorithm(d.kind, 1024, d.dtype, 4, w, kDefaultOptions);
  std::string line = explain(d, 4, w, c);
  EXPECT_NE(line.find("allreduce #7 1024 B f32 sum on 4 ranks (2 hosts"), std::string::npos)
      << line;
  EXPECT_NE(line.find(std::string(": ") + toString(c.algo)), std::string::npos) << line;
  EXPECT_NE(line.find("[model:"), std::string::npos) << line;
}

// The ring runs both ways only for all-reduce, on 3+ ranks, from the tuning's size, and says so.
TEST(Select, RingBothWaysFromTheTuningsSize) {
  Options o = kDefaultOptions;
  o.algorithm = parseAlgorithmSetting("ring");
  const Placement flat{8, 1, true, true};
  EXPECT_FALSE(chooseAlgorithm(CollectiveKind::kAllReduce, 64u << 20, DataType::kF32, 8, flat, o)
                   .bothWays);  // off by default
  o.tuning.ringBidirectionalBytes = 4u << 20;
  EXPECT_TRUE(
      chooseAlgorithm(CollectiveKind::kAllReduce, 4u << 20, DataType::kF32, 8, flat, o).bothWays);
  EXPECT_FALSE(
      chooseAlgorithm(CollectiveKind::kAllReduce, (4u << 20) - 4, DataType::kF32, 8, flat, o)
          .bothWays);
  EXPECT_FALSE(chooseAlgorithm(CollectiveKind::kAllReduce, 64u << 20, DataType::kF32, 2,
                               Placement{2, 1, true, true}, o)
                   .bothWays);
  o.algorithm = parseAlgorithmSetting("allreduce=ring,reduce_scatter=ring");
  EXPECT_FALSE(
      chooseAlgorithm(CollectiveKind::kReduceScatter, 64u << 20, DataType::kF32, 8, flat, o)
          .bothWays);
  OpDesc d;
  d.kind = CollectiveKind::kAllReduce;
  d.count = 16u << 20;
  d.dtype = DataType::kF32;
  Choice c = chooseAlgorithm(d.kind, 64u << 20, d.dtype, 8, flat, o);
  std::string line = explain(d, 8, flat, c);
  EXPECT_NE(line.find(": ring (both ways) (forced by CHORUS_ALGO)"), std::string::npos) << line;
}

TEST(Select, ModelGrowsWithSize) {
  const Tuning t;
  for (AlgorithmId a : algorithmsFor(CollectiveKind::kAllReduce)) {
    if (a == AlgorithmId::kHierarchical) continue;
    double prev = 0;
    for (size_t bytes = 8; bytes <= (256u << 20); bytes *= 4) {
      double s = predictSeconds(CollectiveKind::kAllReduce, a, bytes, DataType::kF32, 6, spread(6),
                                t, 512 * 1024);
      ASSERT_TRUE(std::isfinite(s)) << toString(a);
      EXPECT_GT(s, prev) << toString(a) << " " << bytes;
      prev = s;
    }
  }
  EXPECT_TRUE(std::isinf(predictSeconds(CollectiveKind::kBroadcast, AlgorithmId::kRing, 8,
                                        DataType::kU8, 4, spread(4), t, 512 * 1024)));
}

AlgorithmId pickFor(CollectiveKind kind, size_t bytes, int n, const Options& o = {}) {
  return chooseAlgorithm(kind, bytes, DataType::kF32, n, spread(n), o).algo;
}

TEST(Select, BroadcastLatencyBoundSmallBandwidthBoundLarge) {
  // A handful of bytes: ceil(log2 N) rounds beat the chain's N - 1 hops.
  for (int n : {4, 8, 64}) {
    EXPECT_EQ(pickFor(CollectiveKind::kBroadcast, 8, n), AlgorithmId::kBinomial) << n;
  }
  // 64 MiB: the pipelined chain moves each byte over each link once; the binomial tree's root
  // would send the whole buffer log2 N times.
  AlgorithmId large = pickFor(CollectiveKind::kBroadcast, 64u << 20, 8);
  EXPECT_TRUE(large == AlgorithmId::kChain || large == AlgorithmId::kScatterAllGather)
      << toString(large);
  // At many ranks the chain's fill (N - 2 segments) costs more than scatter + all-gather.
  EXPECT_EQ(pickFor(CollectiveKind::kBroadcast, 64u << 20, 1024), AlgorithmId::kScatterAllGather);
  // Two ranks: one message either way, the tie goes to the chain (listed first).
  EXPECT_EQ(pickFor(CollectiveKind::kBroadcast, 8, 2), AlgorithmId::kChain);
  const Tuning t;
  for (AlgorithmId a : algorithmsFor(CollectiveKind::kBroadcast)) {
    double prev = 0;
    for (size_t bytes = 8; bytes <= (256u << 20); bytes *= 4) {
      for (int n : {2, 3, 7, 64}) {
        const double s = predictSeconds(CollectiveKind::kBroadcast, a, bytes, DataType::kU8, n,
                                        spread(n), t, 512 * 1024);
        ASSERT_TRUE(std::isfinite(s)) << toString(a) << " " << n;
      }
      const double s = predictSeconds(CollectiveKind::kBroadcast, a, bytes, DataType::kU8, 7,
                                      spread(7), t, 512 * 1024);
      EXPECT_GT(s, prev) << toString(a) << " " << bytes;
      prev = s;
    }
  }
}

TEST(Select, HalvingAndDoublingOnlyForPowersOfTwo) {
  const Tuning t;
  for (int n : {4, 8, 64}) {
    // Same bytes as the ring in log2 N steps: they win on a flat layout (at two ranks they are
    // the ring, and the tie goes to the ring).
    EXPECT_EQ(pickFor(CollectiveKind::kReduceScatter, 4096, n), AlgorithmId::kHalving) << n;
    EXPECT_EQ(pickFor(CollectiveKind::kAllGather, 4096, n), AlgorithmId::kDoubling) << n;
  }
  for (int n : {3, 5, 6, 7, 12}) {
    for (auto [kind, algo] : {std::pair{CollectiveKind::kReduceScatter, AlgorithmId::kHalving},
                              std::pair{CollectiveKind::kAllGather, AlgorithmId::kDoubling}}) {
      EXPECT_TRUE(
          std::isinf(predictSeconds(kind, algo, 4096, DataType::kF32, n, spread(n), t, 512 * 1024)))
          << toString(algo) << " " << n;
      Choice c = chooseAlgorithm(kind, 4096, DataType::kF32, n, spread(n), kDefaultOptions);
      EXPECT_EQ(c.algo, AlgorithmId::kRing);
      for (const auto& k : c.candidates) EXPECT_NE(k.algo, algo);
      // Forced where it cannot run: a clear error, not a silent fallback.
      Options o;
      o.algorithm = parseAlgorithmSetting(std::string(toString(kind)) + "=" + toString(algo));
      try {
        chooseAlgorithm(kind, 4096, DataType::kF32, n, spread(n), o);
        ADD_FAILURE() << toString(o.algorithm) << " accepted on " << n << " ranks";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("power-of-two"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(toString(algo)), std::string::npos) << e.what();
      }
    }
  }
  // Forced on a power of two, and a group of one needs nothing.
  Options o;
  o.algorithm = parseAlgorithmSetting(
      "reduce_scatter=halving,all_gather=doubling,broadcast=scatter_allgather");
  EXPECT_EQ(pickFor(CollectiveKind::kReduceScatter, 8, 4, o), AlgorithmId::kHalving);
  EXPECT_EQ(pickFor(CollectiveKind::kAllGather, 64u << 20, 4, o), AlgorithmId::kDoubling);
  EXPECT_EQ(pickFor(CollectiveKind::kBroadcast, 8, 3, o), AlgorithmId::kScatterAllGather);
  EXPECT_EQ(pickFor(CollectiveKind::kReduceScatter, 8, 1, o), AlgorithmId::kNone);
  // Hosts with several ranks each share their link: the ring wins the large sizes there.
  const Placement layered{2, 4, true, true};
  EXPECT_EQ(chooseAlgorithm(CollectiveKind::kAllGather, 64u << 20, DataType::kF32, 8, layered,
                            kDefaultOptions)
                .algo,
            AlgorithmId::kRing);
}

TEST(Select, NewAlgorithmNamesAreAccepted) {
  EXPECT_STREQ(toString(AlgorithmId::kBinomial), "binomial");
  EXPECT_STREQ(toString(AlgorithmId::kScatterAllGather), "scatter_allgather");
  EXPECT_STREQ(toString(AlgorithmId::kHalving), "halving");
  EXPECT_STREQ(toString(AlgorithmId::kDoubling), "doubling");
  EXPECT_NO_THROW(parseAlgorithmSetting(
      "broadcast=binomial,reduce_scatter=halving,all_gather=doubling,allreduce=rhd"));
  EXPECT_EQ(forcedAlgorithm(CollectiveKind::kBroadcast,
                            parseAlgorithmSetting("broadcast=scatter_allgather")),
            AlgorithmId::kScatterAllGather);
  // Each belongs to its own collective only.
  for (const char* bad : {"binomial", "allreduce=halving", "all_gather=halving",
                          "reduce_scatter=doubling", "broadcast=doubling", "all_gather=binomial"}) {
    EXPECT_THROW(parseAlgorithmSetting(bad), Error) << bad;
  }
}

TEST(Tuning, FileRoundTripAndErrors) {
  const std::string path = ::testing::TempDir() + "chorus_tuning_test.txt";
  Tuning t;
  t.net = LinkCost{123e-6, 4e-9};
  t.shm = LinkCost{1.5e-6, 0.05e-9};
  t.gamma[static_cast<size_t>(DataType::kBF16)] = 2e-9;
  t.ringBidirectionalBytes = 4 << 20;
  t.writeFile(path, "test file\nsecond line");
  Tuning r = Tuning::fromFile(path);
  EXPECT_NEAR(r.net.alpha, 123e-6, 1e-12);
  EXPECT_NEAR(r.net.beta, 4e-9, 1e-15);
  EXPECT_NEAR(r.shm.alpha, 1.5e-6, 1e-12);
  EXPECT_NEAR(r.gamma[static_cast<size_t>(DataType::kBF16)], 2e-9, 1e-15);
  EXPECT_EQ(r.ringBidirectionalBytes, 4 << 20);

  // Keys left out keep the built-in values; comments and blank lines are fine.
  {
    std::ofstream f(path);
    f << "# only one value\n\nnet.alpha_us 7   # trailing comment\n";
  }
  r = Tuning::fromFile(path);
  EXPECT_NEAR(r.net.alpha, 7e-6, 1e-12);
  EXPECT_EQ(r.shm.alpha, Tuning{}.shm.alpha);
  EXPECT_EQ(r.ringBidirectionalBytes, 0);  // off unless measured faster

  for (const char* bad : {"net.alpha_us\n", "net.alpha_us fast\n", "net.latency 3\n",
                          "net.alpha_us -1\n", "net.alpha_us 1 2\n"}) {
    {
      std::ofstream f(path);
      f << "# line 1\n" << bad;
    }
    try {
      Tuning::fromFile(path);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path + ":2"), std::string::npos) << e.what();
    }
  }
  std::remove(path.c_str());
  EXPECT_THROW(Tuning::fromFile(path), Error);  // missing file
}

}  // namespace
}  // namespace chorus::algo
