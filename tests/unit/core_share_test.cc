// The core-sharing policy: which ranks compete for this rank's cores (machine, CPU affinity,
// CPU quota), and the word each rank publishes about itself.
#include "transport/core_share.h"

#include <gtest/gtest.h>

namespace chorus::transport {
namespace {

CorePlacement at(const std::string& machine, std::vector<int> cpus = {}, uint64_t cgroup = 0,
                 double quota = 0) {
  return CorePlacement{machine, std::move(cpus), cgroup, quota};
}

std::vector<CorePlacement> copies(const CorePlacement& p, int n) {
  return std::vector<CorePlacement>(static_cast<size_t>(n), p);
}

TEST(CoreShare, RanksInOtherNamespacesOfOneMachineCount) {
  // Four ranks on one 2-core machine (two per emulated host or container): all compete.
  const auto p = at("boot-a", {0, 1});
  EXPECT_TRUE(ranksOutnumberCores(p, copies(p, 3), 2));
  // Two ranks on two cores do not.
  EXPECT_FALSE(ranksOutnumberCores(p, copies(p, 1), 2));
}

TEST(CoreShare, RanksOnOtherMachinesDoNotCount) {
  const auto self = at("boot-a", {0, 1});
  std::vector<CorePlacement> peers{at("boot-b", {0, 1}), at("boot-c", {0, 1}),
                                   at("boot-d", {0, 1})};
  EXPECT_FALSE(ranksOutnumberCores(self, peers, 2));
}

TEST(CoreShare, UnknownAffinityMeansEveryCpuOfTheMachine) {
  const auto p = at("boot-a");
  EXPECT_TRUE(ranksOutnumberCores(p, copies(p, 4), 4));
  EXPECT_FALSE(ranksOutnumberCores(p, copies(p, 3), 4));
}

TEST(CoreShare, DisjointAffinityDoesNotCompete) {
  // Each rank pinned to its own core of a 4-core machine.
  const auto self = at("boot-a", {0});
  std::vector<CorePlacement> peers{at("boot-a", {1}), at("boot-a", {2}), at("boot-a", {3})};
  EXPECT_FALSE(ranksOutnumberCores(self, peers, 4));
  // Two of them pinned to core 0.
  peers[0] = at("boot-a", {0});
  EXPECT_TRUE(ranksOutnumberCores(self, peers, 4));
}

TEST(CoreShare, AffinityNarrowerThanTheMachine) {
  // 3 ranks allowed on cores 2-3 of a 64-core machine.
  const auto p = at("boot-a", {2, 3});
  EXPECT_TRUE(ranksOutnumberCores(p, copies(p, 2), 64));
}

TEST(CoreShare, OneQuotaSharedByTheRanksOfOneCgroup) {
  // 4 ranks in one container limited to 2 cores, on a 64-core machine.
  const auto p = at("boot-a", {}, 77, 2.0);
  EXPECT_TRUE(ranksOutnumberCores(p, copies(p, 3), 64));
  EXPECT_FALSE(ranksOutnumberCores(p, copies(p, 1), 64));
}

TEST(CoreShare, QuotasOfSeparateCgroupsAddUp) {
  // 4 containers of 1 core each: a core per rank.
  const auto self = at("boot-a", {}, 1, 1.0);
  std::vector<CorePlacement> peers{at("boot-a", {}, 2, 1.0), at("boot-a", {}, 3, 1.0),
                                   at("boot-a", {}, 4, 1.0)};
  EXPECT_FALSE(ranksOutnumberCores(self, peers, 64));
  // Half a core each: yield.
  for (auto* p : {&peers[0], &peers[1], &peers[2]}) p->quotaCores = 0.5;
  auto half = self;
  half.quotaCores = 0.5;
  EXPECT_TRUE(ranksOutnumberCores(half, peers, 64));
}

TEST(CoreShare, QuotaNeverAddsCoresBeyondTheCpuSet) {
  // A quota of 8 cores on a 2-core machine leaves 2.
  const auto p = at("boot-a", {0, 1}, 5, 8.0);
  EXPECT_TRUE(ranksOutnumberCores(p, copies(p, 2), 2));
}

TEST(CoreShare, CpuListRoundTrip) {
  EXPECT_EQ(formatCpuList({0, 1, 2, 3, 6, 8, 9}), "0-3,6,8-9");
  EXPECT_EQ(parseCpuList("0-3,6,8-9"), (std::vector<int>{0, 1, 2, 3, 6, 8, 9}));
  EXPECT_EQ(formatCpuList({}), "");
  EXPECT_TRUE(parseCpuList("").empty());
  EXPECT_TRUE(parseCpuList("3-1").empty());
  EXPECT_TRUE(parseCpuList("x").empty());
  EXPECT_TRUE(parseCpuList("1,,2").empty());
}

TEST(CoreShare, PlacementWordRoundTrip) {
  const auto p = at("0f3c-boot", {0, 1, 5}, 4242, 1.5);
  const std::string word = encodePlacement(p);
  EXPECT_EQ(word.find(' '), std::string::npos);
  const auto q = decodePlacement(word);
  EXPECT_EQ(q.machine, p.machine);
  EXPECT_EQ(q.cpus, p.cpus);
  EXPECT_EQ(q.cgroup, p.cgroup);
  EXPECT_DOUBLE_EQ(q.quotaCores, 1.5);
}

TEST(CoreShare, OlderOrForeignWordsDecodeAsAMachineAlone) {
  const auto q = decodePlacement("somehost/some-boot-id");
  EXPECT_EQ(q.machine, "somehost");
  EXPECT_TRUE(q.cpus.empty());
  EXPECT_EQ(q.quotaCores, 0);
}

TEST(CoreShare, ThisProcessHasAMachineAndCpus) {
  const auto p = thisPlacement();
  EXPECT_FALSE(p.machine.empty());
  EXPECT_FALSE(p.cpus.empty());
  EXPECT_GE(p.quotaCores, 0);
  EXPECT_EQ(decodePlacement(encodePlacement(p)).cpus, p.cpus);
}

}  // namespace
}  // namespace chorus::transport
