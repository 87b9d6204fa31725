// The virtual network itself (src/sim): matching rules, the reports that replace hangs, dry mode
// and its timing model.
#include "sim/virtual_world.h"
#include "algo/collectives.h"
#include "reduce/internal_types.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace chorus::sim {
namespace {

using transport::Request;

WorldConfig ranks(int n) {
  WorldConfig c;
  c.size = n;
  return c;
}

// n hosts of one rank each, dry mode, 10 us and 1 GB/s between hosts, one segment per block.
WorldConfig dryRingHosts(int n, size_t bytes) {
  WorldConfig c = ranks(n);
  c.payload = Payload::kDry;
  c.network.netAlpha = 10e-6;
  c.network.netBeta = 1e-9;
  c.options.segmentBytes = bytes;
  for (int r = 0; r < n; ++r) c.hostOf.push_back(r);
  return c;
}

// One ring all-reduce of `bytes` on a fresh world.
RunResult ringAllReduce(const WorldConfig& c, size_t bytes) {
  VirtualWorld w(c);
  uint8_t* in = w.untouchable(2 * bytes);
  return w.run([&](int r) {
    algo::allReduceWith(w.group(r), AlgorithmId::kRing, in, in + bytes, bytes, reduce::kSimBytes,
                        ReduceOp::kSum);
  });
}

TEST(VirtualWorld, MatchesInOrderAndCopiesPayloads) {
  VirtualWorld w(ranks(3));
  std::vector<std::vector<int>> got(3, std::vector<int>(4, -1));
  RunResult res = w.run([&](int r) {
    const algo::Group& g = w.group(r);
    const int next = (r + 1) % 3, prev = (r + 2) % 3;
    int a = 10 * r, b = 10 * r + 1;
    Request s[2], v[2];
    g.tx->postRecv(v[0], prev, &got[static_cast<size_t>(r)][0], sizeof(int), 0);
    g.tx->postSend(s[0], next, &a, sizeof(int), 0);
    g.tx->postSend(s[1], next, &b, sizeof(int), 1);
    g.tx->postRecv(v[1], prev, &got[static_cast<size_t>(r)][1], sizeof(int), 1);
    for (auto& q : v) g.wait(q);
    for (auto& q : s) g.wait(q);
  });
  ASSERT_TRUE(res.ok) << res.error;
  for (int r = 0; r < 3; ++r) {
    const int prev = (r + 2) % 3;
    EXPECT_EQ(got[static_cast<size_t>(r)][0], 10 * prev);
    EXPECT_EQ(got[static_cast<size_t>(r)][1], 10 * prev + 1);
  }
  EXPECT_EQ(res.messages, 6u);
}

TEST(VirtualWorld, ReportsADeadlockInsteadOfHanging) {
  VirtualWorld w(ranks(2));
  RunResult res = w.run([&](int r) {
    const algo::Group& g = w.group(r);
    int x = r, y = 0;
    Request s, v;
    // Both send first and wait for the send: with rendezvous sends neither gets to its receive.
    g.tx->postSend(s, 1 - r, &x, sizeof(x), 7);
    g.wait(s);
    g.tx->postRecv(v, 1 - r, &y, sizeof(y), 7);
    g.wait(v);
  });
  ASSERT_FALSE(res.ok);
  EXPECT_NE(res.error.find("deadlock"), std::string::npos) << res.error;
  EXPECT_NE(res.error.find("rank 0 waits for rank 1 to receive its message (step 7, 4 bytes)"),
            std::string::npos)
      << res.error;
  EXPECT_NE(res.error.find("rank 1 waits for rank 0 to receive"), std::string::npos) << res.error;
  // The world is usable again afterwards.
  RunResult ok = w.run([](int) {});
  EXPECT_TRUE(ok.ok) << ok.error;
}

TEST(VirtualWorld, ReportsAMissingSender) {
  VirtualWorld w(ranks(3));
  RunResult res = w.run([&](int r) {
    if (r != 2) return;
    int y = 0;
    Request v;
    w.group(r).tx->postRecv(v, 0, &y, sizeof(y), 3);
    w.group(r).wait(v);
  });
  ASSERT_FALSE(res.ok);
  EXPECT_NE(res.error.find("rank 2 waits for a message from rank 0 (step 3, 4 bytes)"),
            std::string::npos)
      << res.error;
}

TEST(VirtualWorld, StepAndSizeMismatchesAreErrors) {
  for (int variant = 0; variant < 2; ++variant) {
    VirtualWorld w(ranks(2));
    RunResult res = w.run([&](int r) {
      const algo::Group& g = w.group(r);
      int buf[2] = {0, 0};
      Request q;
      if (r == 0) {
        g.tx->postSend(q, 1, buf, sizeof(int), 1);
      } else {
        g.tx->postRecv(q, 0, buf, variant == 0 ? sizeof(int) : 2 * sizeof(int),
                       variant == 0 ? 2 : 1);
      }
      g.wait(q);
    });
    ASSERT_FALSE(res.ok);
    EXPECT_NE(res.error.find("rank 1 receives"), std::string::npos) << res.error;
    EXPECT_NE(res.error.find("rank 0, whose next message is (step 1, 4 bytes)"), std::string::npos)
        << res.error;
  }
}

TEST(VirtualWorld, DifferentCallsAreAMismatch) {
  VirtualWorld w(ranks(2));
  RunResult res = w.run([&](int r) {
    const algo::Group& g = w.group(r);
    OpDesc d;
    d.kind = CollectiveKind::kAllReduce;
    d.count = r == 0 ? 4 : 5;  // the ranks disagree on the count
    g.tx->beginOp(d);
    int x = 0;
    Request q;
    if (r == 0) {
      g.tx->postSend(q, 1, &x, sizeof(x), 0);
    } else {
      g.tx->postRecv(q, 0, &x, sizeof(x), 0);
    }
    g.wait(q);
  });
  ASSERT_FALSE(res.ok);
  EXPECT_NE(res.error.find("calls differ"), std::string::npos) << res.error;
}

TEST(VirtualWorld, RequestsLeftPendingAreReported) {
  VirtualWorld w(ranks(2));
  RunResult res = w.run([&](int r) {
    if (r != 1) return;
    static int y;
    static Request v;  // outlives the rank, as a careless algorithm's might not
    w.group(r).tx->postRecv(v, 0, &y, sizeof(y), 0);
  });
  ASSERT_FALSE(res.ok);
  EXPECT_NE(res.error.find("rank 1 returned with 1 request(s) still pending"), std::string::npos)
      << res.error;
}

TEST(VirtualWorld, UnreceivedEagerMessagesAreReported) {
  WorldConfig c;
  c.size = 2;
  c.payload = Payload::kDry;
  VirtualWorld w(c);
  RunResult res = w.run([&](int r) {
    if (r != 0) return;
    Request s;
    w.group(r).tx->postSend(s, 1, w.untouchable(64), 64, 9);
    w.group(r).wait(s);
  });
  ASSERT_FALSE(res.ok);
  EXPECT_NE(
      res.error.find("rank 0 sent rank 1 a message (step 9, 64 bytes) that it never received"),
      std::string::npos)
      << res.error;
}

// Every rank threw before sending anything: the algorithm does not take this collective.
bool refused(const RunResult& res) { return !res.ok && res.messages == 0; }

bool mustRunAllReduce(AlgorithmId id) {
  return id == AlgorithmId::kRing || id == AlgorithmId::kRecursiveDoubling ||
         id == AlgorithmId::kHalvingDoubling || id == AlgorithmId::kOneShot ||
         id == AlgorithmId::kTwoShot || id == AlgorithmId::kHierarchical;
}

// Dry mode runs every all-reduce algorithm (and the other collectives) on addresses that fault
// when touched, and timing follows the alpha-beta model.
TEST(VirtualWorld, DryModeTouchesNoPayload) {
  for (int n : {2, 3, 4, 7, 8, 12}) {
    for (bool layered : {false, true}) {
      WorldConfig c;
      c.size = n;
      c.payload = Payload::kDry;
      c.network.netAlpha = 5e-6;
      c.network.netBeta = 1e-10;
      c.network.shmAlpha = 1e-6;
      c.network.shmBeta = 5e-11;
      c.network.gamma = 1e-10;
      c.network.copy = 5e-11;
      c.options.segmentBytes = 64 * 1024;
      for (int r = 0; r < n; ++r) c.hostOf.push_back(layered ? r / 2 : r);
      VirtualWorld w(c);
      for (int v = 1; v < 256; ++v) {
        const auto id = static_cast<AlgorithmId>(v);
        if (std::string(toString(id)) == "unknown-algorithm") continue;
        if (id == AlgorithmId::kHierarchical && !w.layered()) continue;
        for (size_t bytes :
             {size_t{0}, size_t{1}, size_t{1000}, size_t{3u << 20}, size_t{17u << 20}}) {
          uint8_t* in = w.untouchable(2 * bytes);
          RunResult res = w.run([&](int r) {
            algo::allReduceWith(w.group(r), id, in, in + bytes, bytes, reduce::kSimBytes,
                                ReduceOp::kAvg);
          });
          if (refused(res) && !mustRunAllReduce(id)) continue;  // not an all-reduce algorithm
          EXPECT_TRUE(res.ok) << toString(id) << " n=" << n << " bytes=" << bytes << ": "
                              << res.error;
          if (bytes >= 1000 && res.ok) {
            EXPECT_GT(res.seconds, 0) << toString(id);
          }
        }
      }
      // The other collectives with every algorithm that takes them.
      for (auto kind : {CollectiveKind::kReduceScatter, CollectiveKind::kAllGather,
                        CollectiveKind::kBroadcast, CollectiveKind::kBarrier}) {
        for (int v = 1; v < 256; ++v) {
          OpDesc d;
          d.kind = kind;
          d.count = 100000;
          d.dtype = reduce::kSimBytes;
          d.root = n - 1;
          d.algo = static_cast<AlgorithmId>(v);
          if (std::string(toString(d.algo)) == "unknown-algorithm") continue;
          uint8_t* in = w.untouchable(2 * d.count * static_cast<size_t>(n));
          RunResult res = w.run([&](int r) {
            algo::run(w.group(r), algo::Args{d, in, in + d.count * static_cast<size_t>(n)});
          });
          if (refused(res)) continue;
          EXPECT_TRUE(res.ok) << toString(kind) << "[" << toString(d.algo) << "] n=" << n << ": "
                              << res.error;
        }
      }
    }
  }
}

// A flat ring between hosts of one rank each, one segment per block, no reduction cost: every
// one of the 2(N-1) steps moves a block S/N after the previous one arrived, so the time is
// exactly 2(N-1) (alpha + S/N beta).
TEST(VirtualWorld, RingTimeFollowsAlphaBeta) {
  const int n = 4;
  const size_t bytes = 4u << 20;
  WorldConfig c = dryRingHosts(n, bytes);
  RunResult res = ringAllReduce(c, bytes);
  ASSERT_TRUE(res.ok) << res.error;
  const double want = 2 * (n - 1) * (10e-6 + static_cast<double>(bytes) / n * 1e-9);
  EXPECT_NEAR(res.seconds, want, want * 1e-6);

  // A straggler delays everyone by its delay: the ring cannot complete without its blocks.
  c.startDelay.assign(n, 0.0);
  c.startDelay[2] = 1e-3;
  RunResult res2 = ringAllReduce(c, bytes);
  ASSERT_TRUE(res2.ok) << res2.error;
  EXPECT_GT(res2.seconds, want + 0.9e-3);
}

// From Tuning::ringBidirectionalBytes on, the ring runs both ways: twice the messages, each of
// half the size. Every host's NIC carries the same bytes as with one ring, so the predicted time
// stays close to one ring's.
TEST(VirtualWorld, BidirectionalRingFromItsThreshold) {
  const int n = 5;
  const size_t bytes = 1u << 20;
  WorldConfig c = dryRingHosts(n, bytes);
  RunResult one = ringAllReduce(c, bytes);
  c.options.tuning.ringBidirectionalBytes = static_cast<double>(bytes);
  RunResult both = ringAllReduce(c, bytes);
  c.options.tuning.ringBidirectionalBytes = static_cast<double>(bytes + 1);
  RunResult below = ringAllReduce(c, bytes);
  ASSERT_TRUE(one.ok && both.ok && below.ok) << one.error << both.error << below.error;
  EXPECT_EQ(one.messages, static_cast<uint64_t>(n * 2 * (n - 1)));
  EXPECT_EQ(both.messages, 2 * one.messages);
  EXPECT_EQ(below.messages, one.messages);
  EXPECT_NEAR(both.seconds, one.seconds, 0.1 * one.seconds);
  {
    VirtualWorld w(c);
    EXPECT_EQ(w.group(0).ringBidirectionalBytes, bytes + 1);
  }
}

// Two ranks of one host sending to another host share its NIC: their messages go one after the
// other, and the second arrives a full transfer later.
TEST(VirtualWorld, HostLinksAreShared) {
  WorldConfig c;
  c.size = 4;
  c.hostOf = {0, 0, 1, 1};
  c.payload = Payload::kDry;
  c.network.netAlpha = 1e-6;
  c.network.netBeta = 1e-9;
  VirtualWorld w(c);
  const size_t bytes = 1u << 20;
  uint8_t* buf = w.untouchable(bytes);
  RunResult res = w.run([&](int r) {
    Request q;
    if (r < 2) {
      w.group(r).tx->postSend(q, r + 2, buf, bytes, 0);
    } else {
      w.group(r).tx->postRecv(q, r - 2, buf, bytes, 0);
    }
    w.group(r).wait(q);
  });
  ASSERT_TRUE(res.ok) << res.error;
  const double one = 1e-6 + static_cast<double>(bytes) * 1e-9;
  EXPECT_NEAR(res.finishTime[2], one, 1e-12);
  EXPECT_NEAR(res.finishTime[3], one + static_cast<double>(bytes) * 1e-9, 1e-12);
}

// Hosts that share cores: a ring step of 4 concurrent transfers on 2 cores whose work per byte is
// slower than the wire takes two core-transfers' time; with the cores fast, the wire decides.
TEST(VirtualWorld, SharedCoresBoundTransfersBetweenHosts) {
  const int n = 4;
  const size_t bytes = 4u << 20;
  auto ringTime = [&](int cores, double coreTime) {
    WorldConfig c = dryRingHosts(n, bytes);
    c.network.sharedCores = cores;
    c.network.netCoreTime = coreTime;
    RunResult res = ringAllReduce(c, bytes);
    EXPECT_TRUE(res.ok) << res.error;
    return res.seconds;
  };
  const double block = static_cast<double>(bytes) / n;
  const double wire = 2 * (n - 1) * (10e-6 + block * 1e-9);
  EXPECT_NEAR(ringTime(0, 0), wire, wire * 1e-6);
  EXPECT_NEAR(ringTime(2, 0.1e-9), wire, wire * 1e-6);  // cores 10x faster than the wire
  // 3 ns of core per byte: each step's 4 blocks go 2 at a time, so a step ends after 2 x 3 ns
  // per byte of a block, plus alpha.
  const double cpu = 2 * (n - 1) * (10e-6 + 2 * block * 3e-9);
  EXPECT_NEAR(ringTime(2, 3e-9), cpu, cpu * 0.01);
}

// An algorithm that reads or writes a payload in dry mode dies at once, saying so.
TEST(VirtualWorldDeathTest, TouchingAPayloadInDryModeIsAClearCrash) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        WorldConfig c;
        c.size = 2;
        c.payload = Payload::kDry;
        VirtualWorld w(c);
        uint8_t* p = w.untouchable(64);
        w.run([&](int r) {
          if (r == 1) {
            volatile uint8_t x = p[3];
            (void)x;
          }
        });
      },
      "rank 1 touched a payload in dry mode");
}

}  // namespace
}  // namespace chorus::sim
