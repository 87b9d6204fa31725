// When a wait over TCP stops polling: once the request's rate so far puts its end further away
// than a few spins.
#include "transport/wait_policy.h"

#include <gtest/gtest.h>

namespace chorus::transport {
namespace {

using std::chrono::microseconds;

TEST(WaitPolicy, NoRateBeforeEnoughBytesMoved) {
  // Nothing moved yet (the peer may answer any moment), or too little to trust the rate.
  EXPECT_FALSE(endIsFar(0, microseconds(10000), 64 << 20, microseconds(800)));
  EXPECT_FALSE(endIsFar(kRateSampleBytes - 1, microseconds(10000), 64 << 20, microseconds(800)));
}

TEST(WaitPolicy, FarAtLinkRate) {
  // 1 Gbit/s: 125 KB per ms. 256 KiB still to come take about 2 ms: far beyond 800 us.
  EXPECT_TRUE(endIsFar(128000, microseconds(1000), 256 << 10, microseconds(800)));
  // 50 KB take 0.4 ms: near.
  EXPECT_FALSE(endIsFar(128000, microseconds(1000), 50000, microseconds(800)));
}

TEST(WaitPolicy, FastLinkStaysNear) {
  // 10 GB/s: 512 KiB take about 52 us.
  EXPECT_FALSE(endIsFar(1 << 20, microseconds(100), 512 << 10, microseconds(800)));
}

TEST(WaitPolicy, NapGathersABatchAtMostTheLongestNap) {
  // 125 KB per ms: 64 KiB gather in about 524 us, more than the longest nap.
  EXPECT_EQ(napFor(125000, microseconds(1000)), std::chrono::nanoseconds(kLongestNap));
  // 1 GB/s: 64 KiB in about 65.5 us.
  const auto nap = napFor(1000000, microseconds(1000));
  EXPECT_GT(nap, microseconds(60));
  EXPECT_LT(nap, microseconds(70));
  EXPECT_EQ(napFor(0, microseconds(1000)).count(), 0);
}

TEST(WaitPolicy, RateIsTrustedFromTheSampleOn) {
  EXPECT_EQ(rateOf(kRateSampleBytes - 1, microseconds(100)), 0.0);
  EXPECT_EQ(rateOf(1 << 20, microseconds(0)), 0.0);
  EXPECT_DOUBLE_EQ(rateOf(125000, microseconds(1000)), 0.125);  // 1 Gbit/s in bytes per ns
}

TEST(WaitPolicy, ACarriedRateDecidesLikeAMeasuredOne) {
  // The previous segment's 1 Gbit/s: 512 KiB are about 4.2 ms away, far beyond 1 ms of spin.
  EXPECT_TRUE(endIsFarAt(0.125, 512 << 10, microseconds(1000)));
  EXPECT_FALSE(endIsFarAt(0.125, 64 << 10, microseconds(1000)));
  // No rate known: never far (poll as before).
  EXPECT_FALSE(endIsFarAt(0, 64 << 20, microseconds(1)));
  // The nap at a rate is the one napFor gives for the same rate.
  EXPECT_EQ(napAt(0.125), napFor(125000, microseconds(1000)));
  EXPECT_EQ(napAt(0).count(), 0);
}

}  // namespace
}  // namespace chorus::transport
