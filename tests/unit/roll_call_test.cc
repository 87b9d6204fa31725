// Rendezvous claims (core/roll_call.h): a world-size mismatch fails on rank 0 too when rank 0
// counted the last arrival itself and went on before the other rank could post the conflict.
#include "core/roll_call.h"
#include "common/deadline.h"

#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

namespace chorus {
namespace {

using namespace std::chrono_literals;

TEST(RollCall, RankZeroCountingLastStillSeesAnotherWorldSize) {
  auto store = makeHashStore();
  std::string oneError;
  // Rank 1 believes in a world of 3; it arrives first and waits for rank 0's claim.
  std::thread one([&] {
    try {
      rollCall(*store, 1, 1, 3, Deadline::after(10s));
    } catch (const Error& e) {
      oneError = e.what();
    }
  });
  // Rank 0 (a world of 2) comes once rank 1 is counted, so that its own arrival completes the
  // count of 2: it must not take that as a formed world.
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (store->add("chorus/1/joined", 0) < 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  std::string zeroError;
  try {
    rollCall(*store, 1, 0, 2, Deadline::after(10s));
  } catch (const Error& e) {
    zeroError = e.what();
  }
  one.join();
  EXPECT_NE(zeroError.find("says the world has 3 ranks, rank 0"), std::string::npos) << zeroError;
  EXPECT_NE(oneError.find("says the world has 3 ranks, rank 0"), std::string::npos) << oneError;
}

}  // namespace
}  // namespace chorus
