// Zero-copy sends between processes (CHORUS_TCP_ZEROCOPY_BYTES): a buffer overwritten as soon as
// a send or an all-reduce returns never changes what the peers receive (zerocopy_worker).
#include "mp_util.h"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace {

using namespace std::chrono_literals;
using namespace chorus::mp;

const std::string kZeroCopyWorker = CHORUS_TEST_BIN_DIR "/zerocopy_worker";

TEST(ZeroCopyProcesses, OverwrittenBuffersNeverReachThePeers) {
  ASSERT_EQ(access(kZeroCopyWorker.c_str(), X_OK), 0) << kZeroCopyWorker << " is missing";
  setenv("CHORUS_TRANSPORT", "tcp", 1);
  setenv("CHORUS_TCP_ZEROCOPY_BYTES", "65536", 1);
  setenv("CHORUS_TCP_ZEROCOPY_KEEP", "1", 1);
  auto r = runLauncher({"-n", "3", "--timeout", "20", "--", kZeroCopyWorker, "65536"}, 60s);
  unsetenv("CHORUS_TRANSPORT");
  unsetenv("CHORUS_TCP_ZEROCOPY_BYTES");
  unsetenv("CHORUS_TCP_ZEROCOPY_KEEP");
  ASSERT_FALSE(r.overran) << r.out << r.err;
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(r.out.find("ZC rank=" + std::to_string(rank) + " wrong=0 calls=12"),
              std::string::npos)
        << r.out << r.err;
  }
}

}  // namespace
