// Failures of reduce, gather, scatter, the v-variants and all-to-all(v) among thread-ranks: calls
// that differ (collective, count, counts, root) end in kMismatch naming both calls, and a rank
// that leaves in the middle is named by the others, promptly.
#include "harness/outcomes.h"
#include "harness/thread_ranks.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace chorus::testing {
namespace {

using Call = std::function<void(Communicator&)>;

struct MismatchCase {
  std::string name;
  Call call;
  std::vector<std::string> mentions;  // in every rank's message: both calls
  // All-to-all-v: a rank whose own messages all matched finishes the call; it learns of the
  // mismatch in its next call (from the rank that saw it).
  bool nextCallMayFail = false;
  // Gather with two roots: a non-root of the other root may finish its part and reach the next
  // call before any frame of the disagreeing call reaches the rank that detects it; that rank
  // then names the two calls by position ("rank 4 is at barrier #1 while this rank waits in
  // gather #0") instead of by their roots. Either account is a correct mismatch.
  std::vector<std::string> orMentions = {};
};

std::vector<MismatchCase> mismatchCases() {
  return {
      {"reduce roots",
       [](Communicator& c) {
         std::vector<float> v(100, 1.0f);
         c.reduce(std::span<float>(v), c.rank() == 1 ? 1 : 0).wait();
       },
       {"reduce #0", "root=0", "root=1"}},
      {"reduce counts",
       [](Communicator& c) {
         std::vector<float> v(c.rank() == 1 ? 101 : 100, 1.0f);
         c.reduce(std::span<float>(v), 0).wait();
       },
       {"reduce #0", "count=100", "count=101"}},
      {"gather roots",
       [](Communicator& c) {
         std::vector<float> in(10, 1.0f), out(10 * static_cast<size_t>(c.size()));
         c.gather(in.data(), out.data(), 10, DataType::kF32, c.rank() == 1 ? 1 : 0).wait();
       },
       {"gather #0", "root=0", "root=1"},
       false,
       {"is at barrier #1 while this rank waits in gather #0"}},
      {"scatter counts",
       [](Communicator& c) {
         const size_t k = c.rank() == 1 ? 11 : 10;
         std::vector<float> in(11 * static_cast<size_t>(c.size())), out(11);
         c.scatter(in.data(), out.data(), k, DataType::kF32, 0).wait();
       },
       {"scatter #0", "count=10", "count=11"}},
      {"reduce against gather",
       [](Communicator& c) {
         std::vector<float> in(10, 1.0f), out(10 * static_cast<size_t>(c.size()));
         if (c.rank() == 1) {
           c.gather(in.data(), out.data(), 10, DataType::kF32, 0).wait();
         } else {
           c.reduce(in.data(), out.data(), 10, DataType::kF32, ReduceOp::kSum, 0).wait();
         }
       },
       {"reduce #0", "gather #0"}},
      {"all_gather_v counts",
       [](Communicator& c) {
         // Same total, different split: only the fingerprint of the list tells them apart.
         std::vector<size_t> counts(static_cast<size_t>(c.size()), 4);
         if (c.rank() == 1) {
           counts[0] = 3;
           counts[1] = 5;
         }
         std::vector<float> in(counts[static_cast<size_t>(c.rank())], 1.0f);
         std::vector<float> out(4 * static_cast<size_t>(c.size()));
         c.allGatherV(in.data(), out.data(), counts.data(), DataType::kF32).wait();
       },
       {"all_gather_v #0", "total="}},
      {"reduce_scatter_v ops",
       [](Communicator& c) {
         std::vector<size_t> counts(static_cast<size_t>(c.size()), 3);
         std::vector<float> in(3 * static_cast<size_t>(c.size()), 1.0f), out(3);
         c.reduceScatterV(in.data(), out.data(), counts.data(), DataType::kF32,
                          c.rank() == 1 ? ReduceOp::kMax : ReduceOp::kSum)
             .wait();
       },
       {"reduce_scatter_v #0", "sum", "max"}},
      {"all_to_all counts",
       [](Communicator& c) {
         const size_t k = c.rank() == 1 ? 3 : 2;
         std::vector<float> in(3 * static_cast<size_t>(c.size())), out(in.size());
         c.allToAll(in.data(), out.data(), k, DataType::kF32).wait();
       },
       {"all_to_all #0", "count=2", "count=3"}},
      {"all_to_all_v sizes",
       [](Communicator& c) {
         // Rank 1 expects 2 elements from everyone, who send it 1.
         const auto n = static_cast<size_t>(c.size());
         std::vector<size_t> sends(n, 1), recvs(n, c.rank() == 1 ? 2 : 1);
         sends[static_cast<size_t>(c.rank())] = recvs[static_cast<size_t>(c.rank())];
         std::vector<float> in(2 * n), out(2 * n);
         c.allToAllV(in.data(), sends.data(), out.data(), recvs.data(), DataType::kF32).wait();
       },
       {"all_to_all_v #0", "bytes"},
       true},
  };
}

TEST(MoreCollectivesFailures, MismatchedCallsFailEveryRankNamingBothCalls) {
  for (const auto& c : mismatchCases()) {
    for (int n : {2, 3, 5}) {
      SCOPED_TRACE(c.name + " n=" + std::to_string(n));
      auto res = outcomes(n, [&](Communicator& comm) {
        c.call(comm);
        comm.barrier().wait();
      });
      for (size_t r = 0; r < res.size(); ++r) {
        SCOPED_TRACE("rank " + std::to_string(r) + ": " + res[r].message);
        if (c.nextCallMayFail && res[r].message.find("barrier #1") != std::string::npos) {
          EXPECT_NE(res[r].code, ErrorCode::kOk);
        } else {
          EXPECT_EQ(res[r].code, ErrorCode::kMismatch);
        }
        const bool byPosition = !c.orMentions.empty() &&
                                std::all_of(c.orMentions.begin(), c.orMentions.end(), [&](auto& m) {
                                  return res[r].message.find(m) != std::string::npos;
                                });
        if (byPosition) {
          EXPECT_EQ(res[r].code, ErrorCode::kMismatch);
          continue;
        }
        for (const auto& m : c.mentions) {
          EXPECT_NE(res[r].message.find(m), std::string::npos) << m;
        }
      }
    }
  }
}

// Rank 3 of 5 leaves after the first call; the second call fails on every other rank (or, where
// this rank's part never involved rank 3, the call after it does) naming rank 3, long before
// the timeout.
TEST(MoreCollectivesFailures, PeerThatLeavesIsNamedByTheOthers) {
  const std::vector<std::pair<std::string, Call>> calls = {
      {"reduce",
       [](Communicator& c) {
         std::vector<float> v(1 << 16, 1.0f);
         c.reduce(std::span<float>(v), 0).wait();
       }},
      {"gather",
       [](Communicator& c) {
         std::vector<float> in(1 << 14, 1.0f), out(in.size() * static_cast<size_t>(c.size()));
         c.gather(std::span<const float>(in), std::span<float>(out), 1).wait();
       }},
      {"scatter",
       [](Communicator& c) {
         std::vector<float> in((1 << 14) * static_cast<size_t>(c.size())), out(1 << 14);
         c.scatter(std::span<const float>(in), std::span<float>(out), 4).wait();
       }},
      {"all_gather_v",
       [](Communicator& c) {
         std::vector<size_t> counts = {5, 0, 1 << 14, 7, 3};
         std::vector<float> in(counts[static_cast<size_t>(c.rank())]), out(5 + (1 << 14) + 10);
         c.allGatherV(std::span<const float>(in), std::span<float>(out),
                      std::span<const size_t>(counts))
             .wait();
       }},
      {"reduce_scatter_v",
       [](Communicator& c) {
         std::vector<size_t> counts = {5, 0, 1 << 14, 7, 3};
         std::vector<float> in(5 + (1 << 14) + 10), out(counts[static_cast<size_t>(c.rank())]);
         c.reduceScatterV(std::span<const float>(in), std::span<float>(out),
                          std::span<const size_t>(counts))
             .wait();
       }},
      {"all_to_all",
       [](Communicator& c) {
         std::vector<float> in(5 << 12), out(in.size());
         c.allToAll(std::span<const float>(in), std::span<float>(out)).wait();
       }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    auto res = outcomes(
        5,
        [&](Communicator& c) {
          call(c);
          if (c.rank() == 3) return;  // leaves: its communicator closes
          call(c);
          call(c);
        },
        testOptions(std::chrono::seconds(30)));
    for (int r = 0; r < 5; ++r) {
      if (r == 3) continue;
      const Outcome& x = res[static_cast<size_t>(r)];
      SCOPED_TRACE("rank " + std::to_string(r) + ": " + x.message);
      EXPECT_TRUE(x.code == ErrorCode::kPeerFailure || x.code == ErrorCode::kAborted);
      // The call after rank 3 left, or (a rank whose call did not involve rank 3, such as a
      // gather's non-root) the one after that, once it learns of the departure.
      EXPECT_TRUE(x.message.find(name + " #1") != std::string::npos ||
                  x.message.find(name + " #2") != std::string::npos);
      EXPECT_NE(x.message.find("rank 3"), std::string::npos);
      EXPECT_LT(x.seconds, 10.0);
    }
  }
}

TEST(MoreCollectivesFailures, InvalidArgumentsStartNothing) {
  expectRanks(3, [](Communicator& c) {
    std::vector<float> a(30), b(30);
    const size_t counts[3] = {1, 2, 3};
    const size_t sends[3] = {1, 1, 1}, recvs[3] = {2, 2, 2};
    auto invalid = [](const std::function<void()>& f, const char* what) {
      try {
        f();
        ADD_FAILURE() << what << " was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << what << ": " << e.what();
      }
    };
    invalid([&] { c.reduce(a.data(), b.data(), 3, DataType::kF32, ReduceOp::kSum, 3); },
            "reduce root 3");
    invalid([&] { c.reduce(a.data(), b.data(), 3, DataType::kF32, static_cast<ReduceOp>(9), 0); },
            "reduce op 9");
    if (c.rank() == 0) {
      invalid([&] { c.reduce(a.data(), a.data() + 1, 3, DataType::kF32, ReduceOp::kSum, 0); },
              "reduce overlap");
      invalid([&] { c.gather(a.data(), nullptr, 3, DataType::kF32, 0); }, "gather null output");
      invalid([&] { c.gather(a.data() + 1, a.data(), 3, DataType::kF32, 0); }, "gather overlap");
      invalid([&] { c.scatter(a.data(), a.data() + 1, 3, DataType::kF32, 0); }, "scatter overlap");
    }
    invalid([&] { c.allGatherV(a.data(), b.data(), nullptr, DataType::kF32); },
            "all_gather_v without counts");
    invalid([&] { c.allGatherV(b.data() + 5, b.data(), counts, DataType::kF32); },
            "all_gather_v overlap");
    invalid(
        [&] { c.reduceScatterV(a.data(), a.data() + 5, counts, DataType::kF32, ReduceOp::kSum); },
        "reduce_scatter_v overlap");
    invalid([&] { c.allToAll(a.data(), a.data() + 1, 3, DataType::kF32); }, "all_to_all overlap");
    invalid([&] { c.allToAllV(a.data(), sends, a.data(), sends, DataType::kF32); },
            "all_to_all_v in place");
    invalid([&] { c.allToAllV(a.data(), sends, b.data(), recvs, DataType::kF32); },
            "all_to_all_v sending itself 1 and receiving 2");
    // Nothing was sent: a correct call still works everywhere.
    std::vector<float> x(1, 1.0f), sum(1, 0.0f);
    c.reduce(x.data(), sum.data(), 1, DataType::kF32, ReduceOp::kSum, 2).wait();
    if (c.rank() == 2) {
      EXPECT_EQ(sum[0], 3.0f);
    }
  });
}

}  // namespace
}  // namespace chorus::testing
