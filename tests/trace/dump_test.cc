// Dumps of a communicator in trouble, with ranks as threads: after a timeout (a rank that stops
// calling collectives), after a mismatch, on request, and on the signal while a call is blocked.
#include "harness/thread_ranks.h"
#include "trace/trace_util.h"
#include "unit/scoped_env.h"

#include <chorus/chorus.h>

#include <gtest/gtest.h>

#include <csignal>
#include <thread>

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;

void allReduceOnce(Communicator& comm) {
  float x = 1, y = 0;
  comm.allReduce(&x, &y, 1, DataType::kF32, ReduceOp::kSum, Run::kBlocking);
}

TEST(TraceDump, TimeoutDumpsOnEveryFailingRankAndShowsTheStuckRank) {
  ScratchDir dir;
  ScopedEnv env;
  env.set("CHORUS_TRACE_DIR", dir.path().c_str());
  env.set("CHORUS_PROGRESS_SECONDS", "0");
  std::atomic<int> failed{0};
  auto errors = runRanks(
      3,
      [&](Communicator& comm) {
        allReduceOnce(comm);
        allReduceOnce(comm);
        if (comm.rank() == 2) {
          // Stuck: alive, but no third call; until the others gave up (bounded).
          auto until = std::chrono::steady_clock::now() + 10s;
          while (failed.load() < 2 && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(10ms);
          }
          const std::string path = comm.dumpTrace(dir.path() + "/stuck");
          EXPECT_NE(path.find("-rank2.json"), std::string::npos);
          return;
        }
        try {
          allReduceOnce(comm);
        } catch (const Error&) {
          ++failed;
          throw;
        }
      },
      testOptions(1500ms));
  EXPECT_EQ(errors.size(), 2u);
  bool someoneWaitsOnRank2 = false;
  for (int r = 0; r < 2; ++r) {
    const std::string path = waitForDump(dir.path(), r, 1s);
    ASSERT_FALSE(path.empty()) << "no dump of rank " << r;
    EXPECT_TRUE(parsesAsJson(path)) << path;
    const std::string json = readFile(path);
    EXPECT_NE(json.find("\"format\": \"chorus-trace/1\""), std::string::npos);
    EXPECT_NE(json.find("\"rank\": " + std::to_string(r)), std::string::npos);
    EXPECT_TRUE(json.find("\"reason\": \"timeout\"") != std::string::npos ||
                json.find("\"reason\": \"failure\"") != std::string::npos)
        << json;
    EXPECT_NE(json.find("\"recorded\": 3"), std::string::npos) << json;
    EXPECT_NE(entryNumbered(json, 0).find("\"state\": \"done\""), std::string::npos) << json;
    EXPECT_NE(entryNumbered(json, 1).find("\"state\": \"done\""), std::string::npos) << json;
    const std::string third = entryNumbered(json, 2);
    ASSERT_FALSE(third.empty()) << json;
    EXPECT_NE(third.find("\"state\": \"waiting\""), std::string::npos) << third;
    if (third.find("\"waiting_on\": 2") != std::string::npos) someoneWaitsOnRank2 = true;
  }
  EXPECT_TRUE(someoneWaitsOnRank2);
  // The stuck rank's own dump: two calls done, none numbered 2.
  const std::string stuck = waitForDump(dir.path() + "/stuck", 2, 1s);
  ASSERT_FALSE(stuck.empty());
  EXPECT_TRUE(parsesAsJson(stuck));
  const std::string json = readFile(stuck);
  EXPECT_NE(json.find("\"reason\": \"request\""), std::string::npos);
  EXPECT_NE(json.find("\"error\": null"), std::string::npos);
  EXPECT_FALSE(entryNumbered(json, 1).empty());
  EXPECT_TRUE(entryNumbered(json, 2).empty()) << json;
  EXPECT_TRUE(dumpsOf(dir.path(), 2).empty());  // it did not fail: no automatic dump
}

TEST(TraceDump, MismatchDumpsBothCalls) {
  ScratchDir dir;
  ScopedEnv env;
  env.set("CHORUS_TRACE_DIR", dir.path().c_str());
  env.set("CHORUS_PROGRESS_SECONDS", "0");
  auto errors = runRanks(
      2,
      [&](Communicator& comm) {
        std::vector<float> x(8, 1), y(8);
        const size_t count = comm.rank() == 0 ? 4 : 8;
        comm.allReduce(x.data(), y.data(), count, DataType::kF32, ReduceOp::kSum, Run::kBlocking);
      },
      testOptions(5s));
  EXPECT_EQ(errors.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const std::string path = waitForDump(dir.path(), r, 1s);
    ASSERT_FALSE(path.empty()) << "no dump of rank " << r;
    EXPECT_TRUE(parsesAsJson(path));
    const std::string json = readFile(path);
    EXPECT_NE(json.find("\"reason\": \"failure\""), std::string::npos) << json;
    const std::string e = entryNumbered(json, 0);
    EXPECT_NE(e.find(r == 0 ? "\"count\": 4," : "\"count\": 8,"), std::string::npos) << e;
    EXPECT_NE(e.find("\"bytes\": " + std::to_string(r == 0 ? 16 : 32)), std::string::npos);
  }
}

TEST(TraceDump, RequestedDumpThroughTheCApiAndWithoutDirectory) {
  ScopedEnv env;
  env.set("CHORUS_TRACE_DIR", nullptr);
  ScratchDir dir;
  expectRanks(2, [&](Communicator& comm) {
    allReduceOnce(comm);
    EXPECT_THROW(comm.dumpTrace(), Error);  // no directory known
    const std::string path = comm.dumpTrace(dir.path());
    EXPECT_TRUE(parsesAsJson(path));
    const std::string e = entryNumbered(readFile(path), 0);
    EXPECT_NE(e.find("\"state\": \"done\""), std::string::npos) << e;
    EXPECT_NE(e.find("\"peers\": [{\"rank\": " + std::to_string(1 - comm.rank())),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("\"sent\": 4"), std::string::npos) << e;
    EXPECT_NE(e.find("\"received\": 4"), std::string::npos) << e;
  });
  chorus_comm* none = nullptr;
  EXPECT_EQ(chorus_comm_dump_trace(none, dir.path().c_str()), CHORUS_ERR_INVALID_ARGUMENT);
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Small blocking calls back to back: only the first of the detail interval has its per-peer
// traffic followed, and the dump says which did not; interval 0 follows every call.
TEST(TraceDump, DetailIntervalFollowsFewCallsOfATightLoop) {
  ScratchDir dir;
  constexpr int kCalls = 40;
  for (const char* interval : {"60000000", "0"}) {
    SCOPED_TRACE(interval);
    ScopedEnv env;
    env.set("CHORUS_TRACE_DETAIL_US", interval);
    std::string dumps[2];
    expectRanks(2, [&](Communicator& comm) {
      for (int i = 0; i < kCalls; ++i) allReduceOnce(comm);
      dumps[comm.rank()] = readFile(comm.dumpTrace(dir.path()));
    });
    for (const std::string& json : dumps) {
      const bool every = std::string(interval) == "0";
      EXPECT_EQ(occurrences(json, "\"detailed\": false"), every ? 0u : kCalls - 1u) << json;
      EXPECT_EQ(occurrences(json, "\"peers\": [{"), every ? kCalls : 1u) << json;
      EXPECT_EQ(occurrences(json, "\"state\": \"done\""), static_cast<size_t>(kCalls));
    }
  }
}

TEST(TraceDump, RecorderOffRefusesDumps) {
  ScopedEnv env;
  env.set("CHORUS_TRACE_ENTRIES", "0");
  ScratchDir dir;
  expectRanks(2, [&](Communicator& comm) {
    allReduceOnce(comm);
    EXPECT_THROW(comm.dumpTrace(dir.path()), Error);
    EXPECT_EQ(comm.stragglerReport().collectives, 0u);
  });
}

TEST(TraceDump, SignalDumpsWhileTheWorkerIsBlocked) {
  ScratchDir dir;
  ScopedEnv env;
  env.set("CHORUS_TRACE_DIR", dir.path().c_str());
  env.set("CHORUS_TRACE_SIGNAL", "USR1");
  env.set("CHORUS_PROGRESS_SECONDS", "0");
  expectRanks(
      2,
      [&](Communicator& comm) {
        if (comm.rank() == 1) {
          // Rank 0 is blocked in all-reduce #0, waiting for this rank.
          std::this_thread::sleep_for(300ms);
          const auto start = std::chrono::steady_clock::now();
          ::kill(::getpid(), SIGUSR1);
          const std::string path = waitForDump(dir.path(), 0, 3s);
          EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);  // no deadlock
          ASSERT_FALSE(path.empty()) << "no dump of rank 0 after the signal";
          EXPECT_TRUE(parsesAsJson(path));
          const std::string json = readFile(path);
          EXPECT_NE(json.find("\"reason\": \"signal\""), std::string::npos);
          const std::string e = entryNumbered(json, 0);
          EXPECT_NE(e.find("\"state\": \"waiting\", \"waiting_on\": 1"), std::string::npos) << json;
        }
        allReduceOnce(comm);
      },
      testOptions(10s));
}

}  // namespace
}  // namespace chorus::testing
