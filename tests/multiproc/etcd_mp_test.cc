// Processes on the etcd store: chorus-run with --store etcd:// (4 ranks create a communicator
// through a one-member etcd on loopback, the first member listed dead, the job's key
// authenticating the records, and run every collective bit-exact), and the elastic job of
// membership_mp_test.cc (a rank killed with SIGKILL; the survivors shrink, a replacement joins)
// on a 3-member etcd whose leader is killed at the same moment.
#include "harness/etcd_server.h"
#include "harness/scratch_dir.h"
#include "multiproc/elastic_job.h"
#include "multiproc/mp_util.h"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

namespace {

using namespace std::chrono_literals;
using chorus::mp::resultsOf;
using chorus::testing::EtcdServer;

const std::string kWorker = CHORUS_TEST_BIN_DIR "/mp_worker";

TEST(EtcdLaunch, RanksRendezvousOnEtcdWithTheFirstMemberDead) {
  std::string why;
  if (EtcdServer::binary(&why).empty()) GTEST_SKIP() << why;
  ASSERT_EQ(access(kWorker.c_str(), X_OK), 0) << kWorker << " is missing: build mp_worker";
  EtcdServer etcd;
  const std::string dead = "127.0.0.1:" + std::to_string(chorus::testing::freeLoopbackPort());
  const std::string url =
      "etcd://" + dead + "," + etcd.endpoint() + "/job-" + std::to_string(getpid());
  // A key of the job's own, as a user of an external store gives one.
  char keyPath[] = "/tmp/chorus-etcd-key-XXXXXX";
  int fd = mkstemp(keyPath);
  ASSERT_GE(fd, 0);
  const std::string key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
  ASSERT_EQ(write(fd, key.data(), key.size()), static_cast<ssize_t>(key.size()));
  close(fd);
  chmod(keyPath, 0600);
  setenv("CHORUS_AUTH_KEY_FILE", keyPath, 1);
  auto r = chorus::mp::runLauncher(
      {"-n", "4", "--store", url, "--timeout", "30", "--", kWorker, "correct"}, 60s);
  unsetenv("CHORUS_AUTH_KEY_FILE");
  unlink(keyPath);
  ASSERT_FALSE(r.overran) << r.err;
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  auto results = resultsOf(r.out, "correct");
  ASSERT_EQ(results.size(), 4u) << r.out << r.err;
  for (const auto& [rank, rec] : results) {
    EXPECT_EQ(rec["status"], "CHORUS_OK") << rec.line;
    EXPECT_EQ(rec["wrong"], "0") << rec.line;
    EXPECT_EQ(rec["identical"], "1") << rec.line;
  }
}

// The membership agreement by compare-and-set between processes, through a cluster that loses
// its leader as the rank dies.
void runElasticOnEtcd(bool replace) {
  std::string why;
  if (EtcdServer::binary(&why).empty()) GTEST_SKIP() << why;
  const std::string worker = CHORUS_TEST_BIN_DIR "/membership_worker";
  ASSERT_EQ(access(worker.c_str(), X_OK), 0) << worker << " is missing";
  EtcdServer etcd(3);
  int leader = -1;
  for (int i = 0; i < 100 && leader < 0; ++i, std::this_thread::sleep_for(20ms))
    leader = etcd.leader();
  ASSERT_GE(leader, 0);
  chorus::test::ScratchDir dir("chorus-elastic-etcd");
  chorus::mp::ElasticJob job(worker, dir.path(), 4, 4096, 10, etcd.url("elastic"));
  job.alsoAtTheKill([&] { etcd.kill(leader); });
  chorus::mp::ElasticRun r = job.run(replace ? 1 : 2, replace, std::chrono::seconds(60));
  ASSERT_TRUE(r.ok) << r.problem << "\n" << r.outputs;
  EXPECT_EQ(r.changedSize, replace ? 4 : 3) << r.outputs;
  // Each all-reduce after the change sums (identity + 1) over the members.
  const long long expected = replace ? 1 + 2 + 3 + 4 : 1 + 2 + 4;
  ASSERT_EQ(r.sums.size(), static_cast<size_t>((replace ? 4 : 3) * 10)) << r.outputs;
  for (long long s : r.sums) EXPECT_EQ(s, expected) << r.outputs;
}

TEST(ElasticOnEtcd, KilledRankAndLeaderSurvivorsShrink) { runElasticOnEtcd(false); }
TEST(ElasticOnEtcd, KilledRankAndLeaderReplacementRejoins) { runElasticOnEtcd(true); }

}  // namespace
