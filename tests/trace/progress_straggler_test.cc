// Progress records in the store while a job runs, and the straggler statistics of a rank that is
// slowed on purpose.
#include "harness/thread_ranks.h"
#include "trace/trace_util.h"
#include "unit/scoped_env.h"

#include <gtest/gtest.h>

#include <atomic>
#include <regex>
#include <thread>

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;

std::string text(const Store::Bytes& b) { return std::string(b.begin(), b.end()); }

uint64_t numberField(const std::string& json, const std::string& name) {
  std::smatch m;
  std::regex re("\"" + name + "\": ([0-9]+)");
  return std::regex_search(json, m, re) ? std::stoull(m[1]) : ~uint64_t{0};
}

TEST(TraceProgress, RecordsAppearInTheStoreAndAdvance) {
  ScopedEnv env;
  env.set("CHORUS_PROGRESS_SECONDS", "0.1");
  auto store = makeHashStore();
  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};
  std::vector<std::thread> ranks;
  std::vector<std::string> errors(2);
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        auto comm = Communicator::create(store, r, 2, testOptions(10s));
        ++ready;
        // Calls in lockstep until told to stop (rank 0 decides, so both make the same number).
        for (;;) {
          int go = r == 0 ? !stop.load() : 0;
          comm->broadcast(&go, 1, DataType::kI32, 0, Run::kBlocking);
          if (!go) break;
          std::this_thread::sleep_for(2ms);
        }
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  auto until = std::chrono::steady_clock::now() + 5s;
  while (ready.load() < 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(5ms);
  }
  std::string id;
  std::string first, second;
  try {
    ASSERT_GE(store->add("chorus/progress/count", 0), 1);
    const std::string comm = text(store->get("chorus/progress/comm/1", 2s));
    std::smatch m;
    ASSERT_TRUE(std::regex_search(comm, m, std::regex("\"communicator\": \"([0-9a-f]{16})\"")))
        << comm;
    id = m[1];
    EXPECT_NE(comm.find("\"size\": 2"), std::string::npos);
    first = text(store->get("chorus/progress/" + id + "/1", 3s));
    std::this_thread::sleep_for(400ms);
    second = text(store->get("chorus/progress/" + id + "/1", 3s));
  } catch (...) {
    stop = true;
    for (auto& t : ranks) t.join();
    throw;
  }
  stop = true;
  for (auto& t : ranks) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_NE(first.find("\"format\": \"chorus-progress/1\""), std::string::npos) << first;
  EXPECT_NE(first.find("\"communicator\": \"" + id + "\""), std::string::npos);
  EXPECT_NE(first.find("\"rank\": 1"), std::string::npos);
  EXPECT_GT(numberField(second, "published_us"), numberField(first, "published_us"));
  EXPECT_GT(numberField(second, "completed"), numberField(first, "completed"));
  EXPECT_GE(numberField(second, "issued"), numberField(second, "completed"));
  EXPECT_GT(numberField(second, "last_progress_us"), 0u);
}

TEST(TraceStragglers, NamesTheRankThatSleepsBeforeEachCall) {
  ScopedEnv env;
  env.set("CHORUS_PROGRESS_SECONDS", "0");
  env.set("CHORUS_REPORT", "1");
  constexpr int kCalls = 30;
  StragglerReport seen[2];
  ::testing::internal::CaptureStderr();
  expectRanks(2, [&](Communicator& comm) {
    for (int i = 0; i < kCalls; ++i) {
      if (comm.rank() == 1) std::this_thread::sleep_for(10ms);
      float x = 1, y = 0;
      comm.allReduce(&x, &y, 1, DataType::kF32, ReduceOp::kSum, Run::kBlocking);
    }
    seen[comm.rank()] = comm.stragglerReport();
  });
  const std::string printed = ::testing::internal::GetCapturedStderr();
  // Rank 0 waited for rank 1 nearly every time (a loaded machine may deschedule rank 0 for as
  // long now and then): rank 1 last, about 10 ms behind.
  const StragglerReport& r0 = seen[0];
  EXPECT_EQ(r0.collectives, static_cast<uint64_t>(kCalls));
  ASSERT_FALSE(r0.ranks.empty());
  const auto& slow = r0.ranks.back();
  EXPECT_EQ(slow.rank, 1);
  EXPECT_GE(slow.lastFraction, 0.7);
  EXPECT_GE(slow.medianLagMs, 3.0);
  EXPECT_LT(slow.medianLagMs, 200.0);
  EXPECT_GE(slow.p99LagMs, slow.medianLagMs);
  // Rank 1 found rank 0's message waiting every time: itself last, lag unknown to it.
  ASSERT_FALSE(seen[1].ranks.empty());
  EXPECT_EQ(seen[1].ranks.back().rank, 1);
  EXPECT_GE(seen[1].ranks.back().lastFraction, 0.7);
  // CHORUS_REPORT=1: rank 0 printed it at destruction.
  EXPECT_NE(printed.find("chorus: straggler report"), std::string::npos) << printed;
  EXPECT_NE(printed.find("rank 1 arrived last in"), std::string::npos) << printed;
  EXPECT_NE(r0.summary().find("rank 1 arrived last in"), std::string::npos);
}

}  // namespace
}  // namespace chorus::testing
