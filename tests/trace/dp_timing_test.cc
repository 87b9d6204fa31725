// The dp layer's view of the flight recorder, with ranks as threads: a rank slowed on purpose
// before its gradients are ready makes the other rank's steps wait for it (waitForSlowestSeconds
// dominates, transferSeconds stays small, slowestRank names it), and the dumps carry the steps'
// backward and bucket spans, which chorus-doctor --timeline shows on a track "rank R dp".
#include "harness/thread_ranks.h"
#include "trace/trace_util.h"
#include "unit/scoped_env.h"

#include <chorus/dp.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kSteps = 3;
constexpr auto kSlowdown = 150ms;

struct RankResult {
  std::vector<dp::StepMetrics> steps;
  std::string dump;
  size_t buckets = 0;
};

TEST(DpStepTiming, ASlowRankShowsAsWaitNotTransferAndTheTimelineShowsTheBuckets) {
  ScratchDir dir;
  ScopedEnv env;
  env.set("CHORUS_PROGRESS_SECONDS", "0");
  env.set("CHORUS_TRACE_ENTRIES", "100");
  std::array<RankResult, 2> results;
  expectRanks(2, [&](Communicator& comm) {
    std::vector<float> w1(256, 1.0f), g1(256), w2(64, 2.0f), g2(64);
    dp::Options o;
    o.bucketBytes = 1024;  // one bucket per tensor
    o.checkEvery = 0;
    dp::Replica rep(comm, o);
    rep.addParameter("w1", w1.data(), g1.data(), w1.size());
    rep.addParameter("w2", w2.data(), g2.data(), w2.size());
    rep.finalize();
    RankResult& mine = results[static_cast<size_t>(comm.rank())];
    mine.buckets = rep.buckets().size();
    for (int s = 0; s < kSteps; ++s) {
      rep.beginStep();
      std::fill(g1.begin(), g1.end(), 0.5f);
      std::fill(g2.begin(), g2.end(), 0.25f);
      if (comm.rank() == 1) std::this_thread::sleep_for(kSlowdown);  // a slow backward
      rep.gradientReady(1);
      rep.gradientReady(0);
      ASSERT_TRUE(rep.waitGradients());
      rep.afterOptimizerStep();
      mine.steps.push_back(rep.lastMetrics());
    }
    mine.dump = comm.dumpTrace(dir.path());
  });
  ASSERT_EQ(results[0].steps.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(results[1].steps.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(results[0].buckets, 2u);
  const double slowdown = std::chrono::duration<double>(kSlowdown).count();
  // Step 1 also waits for the slow rank, but the first step's start is not aligned between
  // ranks (rendezvous, finalize): check the steps after it.
  for (int s = 1; s < kSteps; ++s) {
    const dp::StepMetrics& fast = results[0].steps[static_cast<size_t>(s)];
    const dp::StepMetrics& slow = results[1].steps[static_cast<size_t>(s)];
    SCOPED_TRACE("step " + std::to_string(s + 1));
    EXPECT_GT(fast.waitForSlowestSeconds, 0.5 * slowdown);
    EXPECT_LT(fast.waitForSlowestSeconds, 10 * slowdown);  // bounded, not garbage
    EXPECT_LT(fast.transferSeconds, 0.5 * fast.waitForSlowestSeconds);
    EXPECT_EQ(fast.slowestRank, 1);
    // The slow rank finds its peer's messages waiting: it hardly waits at all.
    EXPECT_LT(slow.waitForSlowestSeconds, 0.5 * slowdown);
    EXPECT_LT(slow.transferSeconds, 0.5 * slowdown);
  }

  // The dumps: a compute span and a bucket span per bucket per step, with their split.
  for (int r = 0; r < 2; ++r) {
    const auto dump = nlohmann::json::parse(readFile(results[static_cast<size_t>(r)].dump));
    ASSERT_TRUE(dump.contains("spans")) << results[static_cast<size_t>(r)].dump;
    int compute = 0, buckets = 0;
    int64_t longestWaitUs = 0;
    for (const auto& s : dump["spans"]) {
      EXPECT_LE(s["start_us"].get<int64_t>(), s["end_us"].get<int64_t>());
      if (s["kind"] == "compute") ++compute;
      if (s["kind"] != "bucket") continue;
      ++buckets;
      EXPECT_EQ(s["bytes"].get<int64_t>(), s["bucket"] == 0 ? 256 : 1024) << s.dump();
      EXPECT_GE(s["call"].get<int64_t>(), 0);
      longestWaitUs = std::max(longestWaitUs, s["wait_us"].get<int64_t>());
    }
    EXPECT_EQ(compute, kSteps);
    EXPECT_EQ(buckets, 2 * kSteps);
    if (r == 0) {
      EXPECT_GT(longestWaitUs, static_cast<int64_t>(0.5 * slowdown * 1e6));
    }
  }

  // chorus-doctor --timeline: a dp track per rank beside its calls.
  const std::string timeline = dir.path() + "/timeline.json";
  const std::string cmd = std::string(CHORUS_BIN_DIR) + "/chorus-doctor/chorus-doctor --timeline " +
                          timeline + " " + dir.path() + " > " + dir.path() + "/doctor.txt 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << readFile(dir.path() + "/doctor.txt");
  const auto trace = nlohmann::json::parse(readFile(timeline));
  std::map<int, std::string> trackNames;
  int bucketSlices = 0, backwardSlices = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      trackNames[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
    }
    if (e["ph"] != "X" || e["cat"] != "dp") continue;
    const std::string name = e["name"];
    const std::string track = trackNames[e["tid"].get<int>()];
    EXPECT_TRUE(track == "rank 0 dp" || track == "rank 1 dp") << track;
    if (name.rfind("bucket ", 0) == 0) {
      ++bucketSlices;
      EXPECT_TRUE(e["args"].contains("wait_for_slowest_us")) << e.dump();
    }
    if (name.rfind("backward", 0) == 0) ++backwardSlices;
  }
  EXPECT_EQ(bucketSlices, 2 * 2 * kSteps);
  EXPECT_EQ(backwardSlices, 2 * kSteps);
}

}  // namespace
}  // namespace chorus::testing
