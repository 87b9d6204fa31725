// The heartbeat's judgement of a peer with no record yet, and the stall check
// (Communicator::setStallTimeout): a peer that is alive (its heartbeat goes on)
// but stays out of the collective the others wait in is declared dead after the stall timeout;
// one that said it is paused, or any peer while the check is off, is waited for.
#include "harness/thread_ranks.h"
#include "unit/scoped_env.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace chorus::testing {
namespace {

using namespace std::chrono_literals;

// Three ranks; after a first all-reduce, rank 1 stays away for `away` (paused or not) while
// ranks 0 and 2 wait in the next one with the stall check at `stall` seconds. Returns the
// ranks' error messages ("" for a rank whose calls all succeeded).
std::vector<std::string> runWithAbsentRank(double stall, bool paused,
                                           std::chrono::milliseconds away) {
  ScopedEnv env;
  env.set("CHORUS_HEARTBEAT_SECONDS", "1");
  env.set("CHORUS_PROGRESS_SECONDS", "0.1");
  std::vector<std::string> errors(3);
  auto failures = runRanks(
      3,
      [&](Communicator& comm) {
        float x = 1;
        comm.allReduce(&x, &x, 1, DataType::kF32, ReduceOp::kSum, Run::kBlocking);
        try {
          if (comm.rank() == 1) {
            comm.setPaused(paused);
            std::this_thread::sleep_for(away);
            comm.setPaused(false);
          } else {
            comm.setStallTimeout(stall);
          }
          float y = 2;
          comm.allReduce(&y, &y, 1, DataType::kF32, ReduceOp::kSum, Run::kBlocking);
          if (y != 6) errors[static_cast<size_t>(comm.rank())] = "wrong sum " + std::to_string(y);
        } catch (const Error& e) {
          errors[static_cast<size_t>(comm.rank())] = e.what();
        }
      },
      testOptions(20s));
  for (const auto& f : failures) ADD_FAILURE() << f;
  return errors;
}

TEST(StallCheck, AlivePeerOutOfTheCollectiveIsDeclaredDeadAfterTheStallTimeout) {
  const auto started = std::chrono::steady_clock::now();
  const auto errors = runWithAbsentRank(1.0, false, 6s);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (int r : {0, 2}) {
    EXPECT_NE(
        errors[static_cast<size_t>(r)].find("rank 1 was declared dead: alive but in no collective"),
        std::string::npos)
        << "rank " << r << ": " << errors[static_cast<size_t>(r)];
  }
  // Rank 1 comes back to a call that cannot complete: its peers gave up on it.
  EXPECT_NE(errors[1], "");
  // The others failed within a few seconds, not the 20 s timeout (rank 1's 6 s away bound the
  // whole run from below).
  EXPECT_LT(waited, 15.0);
}

TEST(StallCheck, PausedPeerIsWaitedFor) {
  const auto errors = runWithAbsentRank(1.0, true, 3s);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

TEST(StallCheck, OffByDefaultAPeerAwayIsWaitedFor) {
  const auto errors = runWithAbsentRank(0, false, 3s);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

TEST(StallCheck, NeedsTheHeartbeat) {
  ScopedEnv env;
  env.set("CHORUS_HEARTBEAT_SECONDS", "0");
  expectRanks(2, [](Communicator& comm) {
    try {
      comm.setStallTimeout(2);
      ADD_FAILURE() << "setStallTimeout without the heartbeat was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("needs the heartbeat"), std::string::npos) << e.what();
    }
    EXPECT_THROW(comm.setStallTimeout(-1), Error);
    comm.setStallTimeout(0);  // off is always fine
  });
}

// A peer stopped before it published its first progress record (here: one whose records are
// off) is judged as if it had published when the others' records started, not left unjudged
// until the collective timeout.
TEST(Heartbeat, PeerWithoutAnyRecordIsJudgedFromTheStartOfTheRecords) {
  ScopedEnv env;
  env.set("CHORUS_HEARTBEAT_SECONDS", "1");
  env.set("CHORUS_PROGRESS_SECONDS", "0.1");
  auto store = makeHashStore();
  std::vector<std::string> errors(3);
  std::vector<std::thread> ranks;
  const auto started = std::chrono::steady_clock::now();
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      Options o = testOptions(20s);
      if (r == 1) o.trace.progressSeconds = 0;  // never publishes
      try {
        auto comm = Communicator::create(store, r, 3, o);
        if (r == 1) std::this_thread::sleep_for(5s);
        float x = 1;
        comm->allReduce(&x, &x, 1, DataType::kF32, ReduceOp::kSum, Run::kBlocking);
      } catch (const Error& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r : {0, 2}) {
    EXPECT_NE(errors[static_cast<size_t>(r)].find("rank 1 was declared dead: no heartbeat"),
              std::string::npos)
        << "rank " << r << ": " << errors[static_cast<size_t>(r)];
  }
  // Bounded below by rank 1's 5 s away; the others' 20 s timeout is far off.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
            15.0);
}

}  // namespace
}  // namespace chorus::testing
