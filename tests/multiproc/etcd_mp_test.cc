// chorus-run with --store etcd://: 4 rank processes create a communicator through a one-member
// etcd on loopback (the first member listed is dead, and the job's key authenticates the store
// records) and run every collective bit-exact (mp_worker "correct").
#include "harness/etcd_server.h"
#include "multiproc/mp_util.h"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

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

}  // namespace
