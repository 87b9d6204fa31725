// The automatic choice seen from a communicator: the debug line per collective, forced choices
// per collective, and an unsupported forced choice refused before anything is sent.
#include "harness/thread_ranks.h"

#include <chorus/chorus.hpp>

#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

namespace chorus::testing {
namespace {

TEST(Choice, DebugLinePerCollectiveOnRankZero) {
  Options o = testOptions();
  o.debug = DebugLevel::kRank0;
  ::testing::internal::CaptureStderr();
  expectRanksOn(
      {"A", "A", "B", "B"},
      [](Communicator& c) {
        std::vector<float> v(1000, 1.0f);
        c.allReduce(std::span<float>(v)).wait();
        c.broadcast(std::span<float>(v), 0).wait();
      },
      o);
  std::string err = ::testing::internal::GetCapturedStderr();
  // One line per collective, from rank 0 only, naming the choice and the model's candidates.
  EXPECT_NE(err.find("chorus[0]: allreduce #0 4000 B f32 sum on 4 ranks (2 hosts, up to 2 per "
                     "host): "),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("chorus[0]: broadcast #1 4000 B f32 on 4 ranks"), std::string::npos) << err;
  EXPECT_NE(err.find("[model: "), std::string::npos) << err;
  EXPECT_EQ(err.find("chorus[1]"), std::string::npos) << err;
}

TEST(Choice, ForcedPerCollective) {
  Options o = testOptions();
  o.algorithm = "allreduce=tree, broadcast=chain";
  expectRanks(
      3,
      [](Communicator& c) {
        std::vector<float> v(100, 1.0f);
        c.allReduce(std::span<float>(v)).wait();
        if (c.lastAlgorithm() != "tree") throw std::runtime_error(c.lastAlgorithm());
        if (v[99] != 3.0f) throw std::runtime_error("wrong sum");
        std::vector<float> all(300);
        c.allGather(std::span<const float>(v), std::span<float>(all)).wait();
        if (c.lastAlgorithm() != "ring") throw std::runtime_error(c.lastAlgorithm());
      },
      o);
}

TEST(Choice, UnsupportedForcedChoiceFailsAtCreation) {
  Options o = testOptions(std::chrono::milliseconds(3000));
  o.algorithm = "all_gather=tree";
  auto errors = runRanks(
      2, [](Communicator&) {}, o);
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& e : errors) {
    EXPECT_NE(e.find("all_gather has no algorithm 'tree'"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace chorus::testing
