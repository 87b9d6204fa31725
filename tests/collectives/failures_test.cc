// Failures among thread-ranks: mismatched calls, a silent or departed peer, user abort and bad
// arguments all end in a clear error on every rank, never a hang or wrong data.
#include "harness/outcomes.h"
#include "harness/thread_ranks.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

namespace chorus::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The first failing call's error on every rank, and the error of one call after it.
std::vector<Outcome> probedOutcomes(int n, const std::function<void(Communicator&)>& body,
                                    Options o = testOptions(seconds(5))) {
  return outcomes(n, body, o, ProbeLater::kYes);
}

TEST(Failures, MismatchedCountsNameBothCalls) {
  auto res = probedOutcomes(3, [](Communicator& c) {
    std::vector<float> v(c.rank() == 1 ? 101 : 100, 1.0f);
    c.allReduce(std::span<float>(v)).wait();
  });
  for (size_t r = 0; r < res.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + res[r].message);
    EXPECT_EQ(res[r].code, ErrorCode::kMismatch);
    EXPECT_NE(res[r].message.find("allreduce #0"), std::string::npos);
    EXPECT_NE(res[r].message.find("count=101"), std::string::npos);
    EXPECT_NE(res[r].message.find("count=100"), std::string::npos);
    EXPECT_EQ(res[r].laterCode, ErrorCode::kAborted);
    EXPECT_NE(res[r].laterMessage.find("allreduce #1"), std::string::npos);
    EXPECT_NE(res[r].laterMessage.find("mismatched"), std::string::npos);
  }
}

TEST(Failures, MismatchedCollectivesOpsTypesAndRoots) {
  using Call = std::function<void(Communicator&, std::vector<float>&)>;
  const std::vector<std::pair<std::string, Call>> cases = {
      {"op",
       [](Communicator& c, std::vector<float>& v) {
         c.allReduce(std::span<float>(v), c.rank() == 0 ? ReduceOp::kSum : ReduceOp::kMax).wait();
       }},
      {"dtype",
       [](Communicator& c, std::vector<float>& v) {
         if (c.rank() == 0) {
           c.allReduce(std::span<float>(v)).wait();
         } else {
           c.allReduce(v.data(), v.data(), v.size(), DataType::kI32, ReduceOp::kSum).wait();
         }
       }},
      {"collective",
       [](Communicator& c, std::vector<float>& v) {
         if (c.rank() == 0) {
           c.allReduce(std::span<float>(v)).wait();
         } else {
           c.broadcast(std::span<float>(v), 0).wait();
         }
       }},
      {"root",
       [](Communicator& c, std::vector<float>& v) {
         c.broadcast(std::span<float>(v), c.rank() == 0 ? 0 : 1).wait();
       }},
  };
  for (const auto& [name, call] : cases) {
    SCOPED_TRACE(name);
    auto res = probedOutcomes(2, [&](Communicator& c) {
      std::vector<float> v(1000, 1.0f);
      call(c, v);
    });
    for (size_t r = 0; r < res.size(); ++r) {
      EXPECT_EQ(res[r].code, ErrorCode::kMismatch) << "rank " << r << ": " << res[r].message;
      EXPECT_EQ(res[r].laterCode, ErrorCode::kAborted) << res[r].laterMessage;
    }
  }
}

// Every broadcast algorithm gives every rank something to receive, so when rank 1 (or every odd
// rank) names root 1 and the others root 0, every rank fails in that very call.
TEST(Failures, MismatchedRootsWithEveryBroadcastAlgorithm) {
  for (const char* algo : {"chain", "binomial", "scatter_allgather"}) {
    for (int n : {2, 4}) {
      for (bool odd : {false, true}) {
        SCOPED_TRACE(std::string(algo) + " n=" + std::to_string(n) + (odd ? " odd" : " one"));
        Options o = testOptions(seconds(5));
        o.algorithm = parseAlgorithmSetting(std::string("broadcast=") + algo);
        auto res = probedOutcomes(
            n,
            [odd](Communicator& c) {
              std::vector<float> v(1000, 1.0f);
              const bool other = odd ? c.rank() % 2 == 1 : c.rank() == 1;
              c.broadcast(std::span<float>(v), other ? 1 : 0).wait();
            },
            o);
        for (size_t r = 0; r < res.size(); ++r) {
          EXPECT_EQ(res[r].code, ErrorCode::kMismatch) << "rank " << r << ": " << res[r].message;
        }
      }
    }
  }
}

// Ranks 0 and 1 timed out in `call` (an 800 ms timeout), and both name rank 2 as the one missing,
// also the rank that waited on the other's behalf.
void expectTimeoutsNamingRank2(const std::vector<Outcome>& res, const std::string& call) {
  for (int r = 0; r < 2; ++r) {
    const Outcome& x = res[static_cast<size_t>(r)];
    SCOPED_TRACE(x.message);
    EXPECT_EQ(x.code, ErrorCode::kTimeout);
    EXPECT_NE(x.message.find(call + " (rank " + std::to_string(r) + ")"), std::string::npos);
    EXPECT_NE(x.message.find("waiting for rank 2"), std::string::npos);
    EXPECT_LT(x.seconds, 2.4);  // the timeout (+ grace), not the peer's return, ends the wait
  }
}

TEST(Failures, SilentPeerTimesOutNamingIt) {
  Options o = testOptions(milliseconds(800));
  auto res = probedOutcomes(
      3,
      [](Communicator& c) {
        if (c.rank() == 2) {
          std::this_thread::sleep_for(milliseconds(3000));  // never joins in time
          throw Error(ErrorCode::kInternal, "expected: rank 2 stays away");
        }
        std::vector<float> v(1000, 1.0f);
        c.allReduce(std::span<float>(v)).wait();
      },
      o);
  expectTimeoutsNamingRank2(res, "allreduce #0");
}

// The same with the ring run both ways (two pipelines waited on together).
TEST(Failures, SilentPeerTimesOutInTheBidirectionalRing) {
  Options o = testOptions(milliseconds(800));
  o.algorithm = parseAlgorithmSetting("ring");
  o.tuning.ringBidirectionalBytes = 1;
  auto res = probedOutcomes(
      3,
      [](Communicator& c) {
        std::vector<float> v(1000, 1.0f);
        c.allReduce(std::span<float>(v)).wait();  // both ways, with every rank
        if (c.rank() == 2) {
          std::this_thread::sleep_for(milliseconds(3000));
          throw Error(ErrorCode::kInternal, "expected: rank 2 stays away");
        }
        c.allReduce(std::span<float>(v)).wait();
      },
      o);
  expectTimeoutsNamingRank2(res, "allreduce #1");
}

// Both pipelines stalled (rank 0 waits for rank 1 one way and silent rank 2 the other) when rank
// 1, with the shorter timeout, gives up on rank 0 first: rank 0 learns of it while polling for
// both, and says it waits for rank 2 itself, so every rank names rank 2.
// Over shared memory (one host) and over TCP: the peer's abort arrives by different paths.
TEST(Failures, StalledRankInTheBidirectionalRingNamesTheSilentOne) {
  for (const char* transport : {"auto", "tcp"}) {
    SCOPED_TRACE(transport);
    Options world = testOptions(seconds(5));
    world.transport = parseTransportKind(transport);
    auto res = probedOutcomes(
        3,
        [](Communicator& parent) {
          Options o = parent.options();
          o.algorithm = parseAlgorithmSetting("ring");
          o.tuning.ringBidirectionalBytes = 1;
          o.timeout = milliseconds(parent.rank() == 1 ? 600 : 1200);
          auto c = parent.split(0, parent.rank(), o);
          std::vector<float> v(1000, 1.0f);
          c->allReduce(std::span<float>(v)).wait();
          if (c->rank() == 2) {
            std::this_thread::sleep_for(milliseconds(3000));
            throw Error(ErrorCode::kInternal, "expected: rank 2 stays away");
          }
          c->allReduce(std::span<float>(v)).wait();
        },
        world);
    expectTimeoutsNamingRank2(res, "allreduce #1");
  }
}

TEST(Failures, PeerThatLeavesFailsOthersPromptly) {
  auto res = probedOutcomes(
      4,
      [](Communicator& c) {
        std::vector<float> v(1 << 20, 1.0f);
        c.allReduce(std::span<float>(v)).wait();
        if (c.rank() == 3) return;  // leaves: its communicator closes
        c.allReduce(std::span<float>(v)).wait();
      },
      testOptions(seconds(30)));
  for (int r = 0; r < 3; ++r) {
    const Outcome& x = res[static_cast<size_t>(r)];
    SCOPED_TRACE(x.message);
    EXPECT_EQ(x.code, ErrorCode::kPeerFailure);
    EXPECT_NE(x.message.find("allreduce #1"), std::string::npos);
    EXPECT_NE(x.message.find("rank 3"), std::string::npos);
    EXPECT_LT(x.seconds, 10.0);
  }
}

TEST(Failures, AbortFailsPendingWorkPromptly) {
  auto res = probedOutcomes(2, [](Communicator& c) {
    std::vector<float> v(1000, 1.0f);
    if (c.rank() == 0) {
      Work w = c.allReduce(std::span<float>(v));  // rank 1 never joins
      std::this_thread::sleep_for(milliseconds(200));
      c.abort();
      w.wait();
    } else {
      std::this_thread::sleep_for(milliseconds(500));
      c.allReduce(std::span<float>(v)).wait();  // rank 0 aborted: this fails too
    }
  });
  EXPECT_EQ(res[0].code, ErrorCode::kAborted) << res[0].message;
  EXPECT_LT(res[0].seconds, 2.0);
  EXPECT_NE(res[1].code, ErrorCode::kOk);
  EXPECT_NE(res[1].message.find("rank 0"), std::string::npos) << res[1].message;
}

TEST(Failures, InvalidArgumentsStartNothing) {
  expectRanks(2, [](Communicator& c) {
    std::vector<float> v(100, 1.0f);
    auto expectInvalid = [&](const std::function<Work()>& f, const char* what) {
      try {
        f().wait();
        ADD_FAILURE() << what << ": no error";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << what << ": " << e.what();
        EXPECT_GT(std::string(e.what()).size(), 10u);
      }
    };
    expectInvalid([&] { return c.allReduce(nullptr, v.data(), 4, DataType::kF32, ReduceOp::kSum); },
                  "null send");
    expectInvalid([&] { return c.allReduce(v.data(), nullptr, 4, DataType::kF32, ReduceOp::kSum); },
                  "null recv");
    expectInvalid(
        [&] {
          return c.allReduce(v.data(), v.data(), 4, static_cast<DataType>(99), ReduceOp::kSum);
        },
        "bad dtype");
    expectInvalid(
        [&] {
          return c.allReduce(v.data(), v.data(), 4, DataType::kF32, static_cast<ReduceOp>(9));
        },
        "bad op");
    expectInvalid([&] { return c.broadcast(v.data(), 4, DataType::kF32, 2); }, "root out of range");
    expectInvalid([&] { return c.broadcast(v.data(), 4, DataType::kF32, -1); }, "negative root");
    expectInvalid(
        [&] { return c.allReduce(v.data(), v.data() + 1, 10, DataType::kF32, ReduceOp::kSum); },
        "overlap");
    expectInvalid(
        [&] { return c.reduceScatter(v.data(), v.data() + 1, 10, DataType::kF32, ReduceOp::kSum); },
        "reduce_scatter overlap");
    expectInvalid([&] { return c.allGather(v.data() + 1, v.data(), 10, DataType::kF32); },
                  "all_gather overlap");
    expectInvalid(
        [&] {
          return c.allReduce(v.data(), v.data(), SIZE_MAX / 2, DataType::kF32, ReduceOp::kSum);
        },
        "overflow");
    // Nothing was started: the next real call works and sees the data unchanged.
    c.allReduce(std::span<float>(v)).wait();
    EXPECT_EQ(v[0], 2.0f);
  });
}

TEST(Failures, DestroyWithPendingWorkReturnsPromptly) {
  auto store = makeHashStore();
  std::thread other([&] {
    auto c = Communicator::create(store, 1, 2, testOptions(seconds(30)));
    std::this_thread::sleep_for(milliseconds(300));
  });
  auto c = Communicator::create(store, 0, 2, testOptions(seconds(30)));
  std::vector<float> v(1000, 1.0f);
  Work w = c->allReduce(std::span<float>(v));
  auto t0 = std::chrono::steady_clock::now();
  c.reset();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  EXPECT_THROW(w.wait(), Error);
  other.join();
}

}  // namespace
}  // namespace chorus::testing
