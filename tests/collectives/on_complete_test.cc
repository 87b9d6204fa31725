// Work::onComplete: the callback runs once, with the outcome, before any wait() returns; at once
// when the work has finished already; and it may issue new work on the same communicator.
#include "harness/thread_ranks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace chorus {
namespace {

using chorus::testing::expectRanks;

TEST(OnComplete, RunsOnceBeforeWaitReturnsWithTheResultInPlace) {
  for (int n : {1, 2, 3}) {
    SCOPED_TRACE("world size " + std::to_string(n));
    expectRanks(n, [n](Communicator& c) {
      std::vector<int64_t> v(13, c.rank() + 1);
      std::atomic<int> calls{0};
      int64_t seen = -1;
      Work w = c.allReduce(std::span<int64_t>(v));
      w.onComplete([&](std::exception_ptr e) {
        EXPECT_EQ(e, nullptr);
        seen = v[12];  // the result is already in place when the callback runs
        calls.fetch_add(1);
      });
      w.wait();
      EXPECT_EQ(calls.load(), 1);
      EXPECT_EQ(seen, int64_t{n} * (n + 1) / 2);
    });
  }
}

TEST(OnComplete, RunsAtOnceOnFinishedWork) {
  expectRanks(2, [](Communicator& c) {
    std::vector<float> v(5, 1.0f);
    Work w = c.allReduce(std::span<float>(v));
    w.wait();
    bool ran = false;
    w.onComplete([&](std::exception_ptr e) { ran = (e == nullptr); });
    EXPECT_TRUE(ran);
  });
}

// A binding completes futures whose callbacks issue the next collective from the worker thread.
TEST(OnComplete, MayIssueNewWorkFromTheCallback) {
  expectRanks(3, [](Communicator& c) {
    std::vector<int32_t> a(7, 1), b(7, 2);
    Work second;
    std::atomic<bool> issued{false};
    Work first = c.allReduce(std::span<int32_t>(a));
    first.onComplete([&](std::exception_ptr) {
      second = c.allReduce(std::span<int32_t>(b));
      issued.store(true);
    });
    first.wait();
    ASSERT_TRUE(issued.load());
    second.wait();
    EXPECT_EQ(a[0], 3);
    EXPECT_EQ(b[6], 6);
  });
}

TEST(OnComplete, ReportsTheFailureOfAnAbortedCommunicator) {
  expectRanks(1, [](Communicator& c) {
    c.abort();
    std::vector<double> v(3, 1.0);
    Work w = c.allReduce(std::span<double>(v));
    std::exception_ptr got;
    w.onComplete([&](std::exception_ptr e) { got = e; });
    EXPECT_NE(got, nullptr);
    EXPECT_THROW(w.wait(), Error);
  });
}

TEST(OnComplete, EmptyWorkIsAnError) {
  Work w;
  EXPECT_THROW(w.onComplete([](std::exception_ptr) {}), Error);
}

}  // namespace
}  // namespace chorus
