// Deadline::after saturates: no timeout overflows the clock, and a negative one has expired.
#include "common/deadline.h"

#include <gtest/gtest.h>

#include <chrono>

namespace chorus {
namespace {

using std::chrono::milliseconds;

TEST(Deadline, HugeTimeoutNeverExpires) {
  const Deadline d = Deadline::after(milliseconds::max());
  EXPECT_EQ(d.at(), Clock::time_point::max());
  EXPECT_FALSE(d.expired());
  EXPECT_EQ(d.remainingMs(100), 100);
}

TEST(Deadline, NegativeTimeoutHasExpired) {
  const Deadline d = Deadline::after(milliseconds(-5));
  EXPECT_TRUE(d.expired());
  EXPECT_EQ(d.remainingMs(), 0);
  EXPECT_TRUE(Deadline::after(milliseconds::min()).expired());
}

TEST(Deadline, OrdinaryTimeoutIsFromNow) {
  const auto before = Clock::now();
  const Deadline d = Deadline::after(milliseconds(60000));
  EXPECT_GE(d.at(), before + milliseconds(60000));
  EXPECT_FALSE(d.expired());
  EXPECT_GT(d.remainingMs(), 50000);
}

}  // namespace
}  // namespace chorus
