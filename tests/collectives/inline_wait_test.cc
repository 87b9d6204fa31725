// Work::wait() runs a collective on the waiting thread when it is the next one due and the
// communicator is idle; otherwise the worker runs it. Either way calls complete in issue order.
#include "harness/thread_ranks.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdint>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace chorus {
namespace {

using chorus::testing::expectRanks;

// Voluntary context switches of the calling thread so far (each sleep on a condition variable
// is one).
long voluntarySwitches() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_nvcsw;
}

std::vector<int64_t> inputs(int r, size_t count, int64_t salt) {
  std::vector<int64_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = (r + 1) * 100 + static_cast<int64_t>(i % 13) + salt;
  return v;
}

void expectSums(const std::vector<int64_t>& v, int n, int64_t salt, const std::string& what) {
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t want = 0;
    for (int r = 0; r < n; ++r) want += (r + 1) * 100 + static_cast<int64_t>(i % 13) + salt;
    ASSERT_EQ(v[i], want) << what << " at " << i;
  }
}

// Handing every call to the worker puts the caller to sleep once per call; running it inline
// never does (a world of one has no peers to wait for).
TEST(InlineWait, BlockingCallsOnAnIdleCommunicatorRunOnTheCaller) {
  expectRanks(1, [](Communicator& c) {
    std::vector<int64_t> v(7, 3);
    constexpr int kCalls = 1000;
    const long before = voluntarySwitches();
    for (int i = 0; i < kCalls; ++i) c.allReduce(std::span<int64_t>(v)).wait();
    const long slept = voluntarySwitches() - before;
    EXPECT_LT(slept, kCalls / 4) << "the caller slept " << slept << " times in " << kCalls
                                 << " calls: the worker ran them";
    EXPECT_EQ(v[0], 3);
  });
}

// Waiting on a later call first must not run it ahead of an earlier one (the ranks would
// disagree on the order and report a mismatch, or mix up the results).
TEST(InlineWait, WaitingOutOfOrderKeepsIssueOrder) {
  for (int n : {1, 2, 3, 5, 8}) {
    SCOPED_TRACE("world size " + std::to_string(n));
    expectRanks(n, [n](Communicator& c) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{13}, size_t{1031}}) {
        std::vector<int64_t> a = inputs(c.rank(), count, 0), b = inputs(c.rank(), count, 7),
                             d = inputs(c.rank(), count, 11);
        Work wa = c.allReduce(std::span<int64_t>(a));
        Work wb = c.allReduce(std::span<int64_t>(b));
        Work wd = c.allReduce(std::span<int64_t>(d));
        // Every rank waits in a different order.
        if (c.rank() % 3 == 0) {
          wd.wait();
          wb.wait();
          wa.wait();
        } else if (c.rank() % 3 == 1) {
          wb.wait();
          wa.wait();
          wd.wait();
        } else {
          wa.wait();
          wd.wait();
          wb.wait();
        }
        expectSums(a, n, 0, "first");
        expectSums(b, n, 7, "second");
        expectSums(d, n, 11, "third");
      }
    });
  }
}

// Several application threads wait on calls of one communicator at once; one of them may run the
// head of the queue while the others sleep or the worker takes the rest.
TEST(InlineWait, ConcurrentWaitersOnOneCommunicator) {
  for (int n : {2, 3}) {
    SCOPED_TRACE("world size " + std::to_string(n));
    expectRanks(n, [n](Communicator& c) {
      constexpr int kCalls = 40;
      std::vector<std::vector<int64_t>> bufs;
      std::vector<Work> works;
      for (int i = 0; i < kCalls; ++i) {
        bufs.push_back(inputs(c.rank(), 1 + static_cast<size_t>(i) * 17, i));
        works.push_back(c.allReduce(std::span<int64_t>(bufs.back())));
      }
      std::vector<std::thread> waiters;
      for (int t = 0; t < 4; ++t) {
        waiters.emplace_back([&, t] {
          for (int i = kCalls - 1 - t; i >= 0; i -= 4) works[static_cast<size_t>(i)].wait();
        });
      }
      for (auto& w : waiters) w.join();
      for (int i = 0; i < kCalls; ++i) {
        expectSums(bufs[static_cast<size_t>(i)], n, i, "call " + std::to_string(i));
      }
    });
  }
}

// A blocking call that runs at once returns a finished work (no state of its own); one issued
// behind queued work waits in turn, with a state of its own; either way the results are right
// and in issue order, and a blocking call on an aborted communicator throws.
TEST(InlineWait, BlockingCallsReturnFinishedWorkInlineOrQueued) {
  for (int n : {1, 2, 3}) {
    SCOPED_TRACE("world size " + std::to_string(n));
    expectRanks(n, [n](Communicator& c) {
      std::vector<int64_t> a = inputs(c.rank(), 13, 0), b = inputs(c.rank(), 13, 5);
      Work w =
          c.allReduce(a.data(), a.data(), a.size(), DataType::kI64, ReduceOp::kSum, Run::kBlocking);
      EXPECT_TRUE(w.isCompleted());
      EXPECT_EQ(w.exception(), nullptr);
      bool ran = false;
      w.onComplete([&](std::exception_ptr e) { ran = e == nullptr; });
      EXPECT_TRUE(ran) << "onComplete on a finished work runs at once";
      w.wait();
      expectSums(a, n, 0, "inline");
      // Queued: a non-blocking call first, then a blocking one that must wait for it.
      std::vector<int64_t> d = inputs(c.rank(), 1031, 9);
      Work first = c.allReduce(std::span<int64_t>(d));
      Work second =
          c.allReduce(b.data(), b.data(), b.size(), DataType::kI64, ReduceOp::kSum, Run::kBlocking);
      EXPECT_TRUE(second.isCompleted());
      EXPECT_TRUE(first.isCompleted()) << "the earlier call finished first";
      expectSums(d, n, 9, "queued first");
      expectSums(b, n, 5, "queued blocking");
      c.barrier(Run::kBlocking);
      // (One rank alone: an abort reaches peers that may still be finishing the barrier.)
      if (n > 1) return;
      c.abort();
      EXPECT_THROW(
          c.allReduce(a.data(), a.data(), a.size(), DataType::kI64, ReduceOp::kSum, Run::kBlocking),
          Error);
    });
  }
}

// A Work may outlive its communicator: it has completed (or failed) by then.
TEST(InlineWait, WorkOutlivesItsCommunicator) {
  expectRanks(2, [](Communicator& c) {
    std::vector<int64_t> v = inputs(c.rank(), 5, 0);
    Work w = c.allReduce(std::span<int64_t>(v));
    w.wait();
    Work pending;
    {
      auto child = c.split(0, c.rank());
      pending = child->barrier();
      pending.wait();
    }
    pending.wait();  // the child is gone; the completed work still answers
    EXPECT_TRUE(pending.isCompleted());
  });
}

}  // namespace
}  // namespace chorus
