// A newcomer's sign of life (core/joiner_liveness.h): with the heartbeat on, the running ranks
// neither admit a newcomer that died while it waited, nor wait for one that died after they
// admitted it longer than about the heartbeat timeout (instead of most of their own timeout).
#include "core/joiner_liveness.h"
#include "core/membership.h"
#include "membership/membership_harness.h"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <chrono>

namespace chorus::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

Options withHeartbeat(double heartbeat) {
  Options o = membershipOptions(std::chrono::seconds(20));
  o.trace.heartbeatSeconds = heartbeat;
  return o;
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(JoinerLiveness, NewcomerDeadWhileWaitingIsPassedOver) {
  auto store = makeHashStore();
  const Options options = withHeartbeat(1);
  const int64_t ticket = membership::enqueueJoiner(*store);
  { membership::JoinerBeat beat(store, ticket, 1); }  // stamps once, then "dies"
  std::this_thread::sleep_for(milliseconds(1300));
  EXPECT_EQ(membership::joinersWaiting(*store, 0), 1);  // without the heartbeat: still counted
  auto errors = runElastic(store, 3, options, [&](int, auto comm) {
    require(comm->joinersWaiting() == 0, "a dead newcomer counted as waiting");
    const auto started = std::chrono::steady_clock::now();
    auto next = comm->shrink();
    require(next->size() == 3, "size " + std::to_string(next->size()));
    require(secondsSince(started) < 5, "admission took " + std::to_string(secondsSince(started)));
    checkCollectives(*next, {0, 1, 2});
  });
  EXPECT_TRUE(errors.empty()) << errors.front();
  try {
    membership::awaitAdmission(*store, ticket, Deadline::after(seconds(2)));
    ADD_FAILURE() << "a passed-over newcomer was admitted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kPeerFailure) << e.what();
    EXPECT_NE(std::string(e.what()).find("passed over"), std::string::npos) << e.what();
  }
}

TEST(JoinerLiveness, NewcomerDeadAfterAdmissionIsNotWaitedFor) {
  auto store = makeHashStore();
  const Options options = withHeartbeat(1);
  std::atomic<bool> queued{false};
  // Queues with a sign of life, is admitted, and dies before it connects.
  auto newcomer = [&] {
    const int64_t ticket = membership::enqueueJoiner(*store);
    membership::JoinerBeat beat(store, ticket, 1);
    queued = true;
    membership::awaitAdmission(*store, ticket, Deadline::after(seconds(15)));
  };
  auto errors =
      runElastic(store, 3, options,
                 [&](int, auto comm) {
                   while (!queued) std::this_thread::sleep_for(milliseconds(10));
                   const auto started = std::chrono::steady_clock::now();
                   auto next = comm->shrink();
                   require(next->size() == 3, "size " + std::to_string(next->size()));
                   // Without the sign of life: two thirds of the 20 s timeout in the connection
                   // alone.
                   require(secondsSince(started) < 8,
                           "admission took " + std::to_string(secondsSince(started)) + " s");
                   checkCollectives(*next, {0, 1, 2});
                 },
                 {newcomer});
  EXPECT_TRUE(errors.empty()) << errors.front();
}

TEST(JoinerLiveness, OffWithoutTheHeartbeat) {
  auto store = makeHashStore();
  const int64_t ticket = membership::enqueueJoiner(*store);
  { membership::JoinerBeat beat(store, ticket, 0); }
  EXPECT_TRUE(membership::joinerAlive(*store, ticket, 0));
  EXPECT_TRUE(membership::joinerAlive(*store, ticket, 1));  // never stamped: not judged
  EXPECT_EQ(membership::joinersWaiting(*store, 1), 1);
}

}  // namespace
}  // namespace chorus::testing
