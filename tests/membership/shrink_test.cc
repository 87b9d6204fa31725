// Communicator::shrink over thread-ranks: ranks lost before, during and between collectives
// (one leaves for good, one aborts and never shrinks, one just stops calling), a rank lost in the
// shrink itself, a shrink with nothing lost, and 100 shrinks in a row without leaks. Every new
// communicator runs every collective against values computed by the test.
#include "core/membership.h"
#include "harness/memory_held.h"
#include "membership/membership_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdio>
#include <numeric>
#include <set>

namespace chorus::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string joinAll(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

enum class When { kBefore, kDuring, kBetween };

struct LossCase {
  int size;
  std::vector<int> lost;
  When when;
};

std::vector<int> without(int size, const std::vector<int>& lost) {
  std::vector<int> out;
  for (int r = 0; r < size; ++r) {
    if (std::find(lost.begin(), lost.end(), r) == lost.end()) out.push_back(r);
  }
  return out;
}

// A lost rank leaves for good: before or between collectives it destroys its communicator (its
// peers see it gone); during one it aborts it from the middle of an all-reduce first. It never
// calls shrink.
void loseRank(std::unique_ptr<Communicator> comm, When when) {
  if (when == When::kDuring) {
    std::vector<int64_t> big(1 << 16, 1);
    Work w = comm->allReduce(std::span<int64_t>(big));
    std::this_thread::sleep_for(milliseconds(5));
    comm->abort();
    try {
      w.wait();
    } catch (const Error&) {
    }
  }
  comm.reset();
}

void runLoss(const LossCase& c) {
  auto store = makeHashStore();
  const std::vector<int> survivors = without(c.size, c.lost);
  std::vector<int> ids(static_cast<size_t>(c.size));
  std::iota(ids.begin(), ids.end(), 0);
  auto errors = runElastic(store, c.size, membershipOptions(seconds(6)), [&](int r, auto comm) {
    const bool lost = std::find(c.lost.begin(), c.lost.end(), r) != c.lost.end();
    if (c.when != When::kBefore) checkCollectives(*comm, ids);
    if (lost) return loseRank(std::move(comm), c.when);
    bool failed = false;
    try {
      for (int i = 0; i < 3; ++i) checkCollectives(*comm, ids);
    } catch (const Error&) {
      failed = true;
    }
    require(failed, "rank " + std::to_string(r) + ": collectives went on without the lost ranks");
    auto next = comm->shrink();
    require(next->size() == static_cast<int>(survivors.size()),
            "rank " + std::to_string(r) + ": new size " + std::to_string(next->size()));
    require(next->formerRanks() == survivors, "rank " + std::to_string(r) + ": formerRanks");
    require(survivors[static_cast<size_t>(next->rank())] == r,
            "rank " + std::to_string(r) + ": new rank " + std::to_string(next->rank()));
    require(next->generation() == 1, "generation " + std::to_string(next->generation()));
    require(comm->failedRanks() == c.lost, "rank " + std::to_string(r) + ": failedRanks");
    require(next->failedRanks().empty(), "new communicator has failed ranks");
    checkCollectives(*next, survivors);
  });
  EXPECT_TRUE(errors.empty()) << joinAll(errors);
}

TEST(Shrink, ThreeRanksOneLostBeforeCollectives) { runLoss({3, {1}, When::kBefore}); }
TEST(Shrink, ThreeRanksTwoLostDuringOne) { runLoss({3, {0, 2}, When::kDuring}); }
TEST(Shrink, FiveRanksOneLostDuringOne) { runLoss({5, {0}, When::kDuring}); }
TEST(Shrink, FiveRanksTwoLostBetween) { runLoss({5, {1, 4}, When::kBetween}); }
TEST(Shrink, EightRanksOneLostBetween) { runLoss({8, {5}, When::kBetween}); }
TEST(Shrink, EightRanksTwoLostBefore) { runLoss({8, {2, 3}, When::kBefore}); }

TEST(Shrink, NothingFailedKeepsTheMembership) {
  auto store = makeHashStore();
  auto errors = runElastic(store, 4, membershipOptions(seconds(20)), [&](int r, auto comm) {
    checkCollectives(*comm, {0, 1, 2, 3});
    auto next = comm->shrink();
    require(next->rank() == r && next->size() == 4, "membership changed");
    require(next->formerRanks() == std::vector<int>({0, 1, 2, 3}), "formerRanks");
    require(next->generation() == 1 && comm->generation() == 0, "generations");
    require(comm->failedRanks().empty(), "failedRanks of the old communicator");
    bool oldFails = false;
    try {
      comm->barrier().wait();
    } catch (const Error& e) {
      oldFails = e.code() == ErrorCode::kAborted;
    }
    require(oldFails, "the replaced communicator still runs collectives");
    checkCollectives(*next, {0, 1, 2, 3});
  });
  EXPECT_TRUE(errors.empty()) << joinAll(errors);
  auto change = store->get(membership::kLastChangeKey, seconds(1));
  EXPECT_EQ(std::string(change.begin(), change.end()),
            "generation=1 size=4 former=0,1,2,3 lost= joined=0");
}

// A rank that stops calling (alive, not aborted) is left out after the grace period, and when it
// calls shrink later it learns that it was declared dead.
TEST(Shrink, SlowRankIsDeclaredDead) {
  auto store = makeHashStore();
  std::atomic<int> done{0};
  auto errors = runElastic(store, 3, membershipOptions(seconds(4)), [&](int r, auto comm) {
    checkCollectives(*comm, {0, 1, 2});
    if (r == 2) {
      while (done.load() < 2) std::this_thread::sleep_for(milliseconds(10));
      try {
        comm->shrink();
      } catch (const Error& e) {
        require(e.code() == ErrorCode::kPeerFailure &&
                    std::string(e.what()).find("rank 2 was declared dead by the survivors") !=
                        std::string::npos,
                std::string("late rank got: ") + e.what());
        return;
      }
      throw std::runtime_error("the late rank was readmitted");
    }
    auto next = comm->shrink();
    ++done;
    require(next->size() == 2 && next->formerRanks() == std::vector<int>({0, 1}), "membership");
    require(comm->failedRanks() == std::vector<int>({2}), "failedRanks");
    checkCollectives(*next, {0, 1});
  });
  EXPECT_TRUE(errors.empty()) << joinAll(errors);
}

// Ranks 2 and 3 leave alive (their replica group broke, say): they keep their communicator
// open and never call shrink, so no failure shows anywhere. Survivors that name them in
// shrink(gone) do not wait for them (without it: half the 20 s timeout), and the two-rank
// communicator works.
TEST(Shrink, GoneRanksAreNotWaitedFor) {
  auto store = makeHashStore();
  std::atomic<int> done{0};
  auto errors = runElastic(store, 4, membershipOptions(seconds(20)), [&](int r, auto comm) {
    checkCollectives(*comm, {0, 1, 2, 3});
    if (r >= 2) {
      while (done.load() < 2) std::this_thread::sleep_for(milliseconds(10));
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    auto next = comm->shrink({2, 3, 7, -1});  // out of range: ignored
    const auto took = std::chrono::steady_clock::now() - start;
    ++done;
    require(took < seconds(5), "shrink(gone) waited " +
                                   std::to_string(std::chrono::duration<double>(took).count()) +
                                   " s for ranks it was told are gone");
    require(next->size() == 2 && next->formerRanks() == std::vector<int>({0, 1}), "membership");
    require(comm->failedRanks() == std::vector<int>({2, 3}), "failedRanks");
    checkCollectives(*next, {0, 1});
  });
  EXPECT_TRUE(errors.empty()) << joinAll(errors);
}

// Rank 3 registers for the agreement and vanishes before connecting: the others retry without
// it, within their timeout.
TEST(Shrink, RankLostDuringTheShrink) {
  auto store = makeHashStore();
  membership::setAfterRegisterHookForTesting([](int rank) {
    if (rank == 3) throw std::runtime_error("vanished");
  });
  auto errors = runElastic(store, 4, membershipOptions(seconds(6)), [&](int r, auto comm) {
    checkCollectives(*comm, {0, 1, 2, 3});
    if (r == 3) {
      try {
        comm->shrink();
      } catch (const std::runtime_error&) {
      }
      return;
    }
    auto next = comm->shrink();
    require(next->size() == 3 && next->formerRanks() == std::vector<int>({0, 1, 2}),
            "membership " + std::to_string(next->size()));
    require(comm->failedRanks() == std::vector<int>({3}), "failedRanks");
    checkCollectives(*next, {0, 1, 2});
  });
  membership::setAfterRegisterHookForTesting(nullptr);
  EXPECT_TRUE(errors.empty()) << joinAll(errors);
}

// 100 shrinks in a row: no file descriptor left behind, nothing in /dev/shm, no memory growth
// beyond a bound.
TEST(Shrink, HundredShrinksLeakNothing) {
  auto store = makeHashStore();
  constexpr int kRanks = 3;
  std::barrier sync(kRanks);
  int fdsBefore = 0, fdsAfter = 0;
  long long memBefore = 0, memAfter = 0;
  std::vector<std::string> shmBefore, shmAfter;
  auto errors = runElastic(store, kRanks, membershipOptions(seconds(20)), [&](int r, auto comm) {
    for (int i = 0; i < 102; ++i) {
      auto next = comm->shrink();
      comm = std::move(next);
      int64_t x = r + 1;
      comm->allReduce(std::span<int64_t>(&x, 1)).wait();
      require(x == 6, "all_reduce after shrink " + std::to_string(i));
      sync.arrive_and_wait();
      if (r == 0 && i == 1) {
        fdsBefore = openFds();
        memBefore = test::memoryHeldBytes();
        shmBefore = devShmEntries();
      }
      if (r == 0 && i == 101) {
        fdsAfter = openFds();
        memAfter = test::memoryHeldBytes();
        shmAfter = devShmEntries();
      }
      sync.arrive_and_wait();
    }
    require(comm->generation() == 102, "generation " + std::to_string(comm->generation()));
  });
  EXPECT_TRUE(errors.empty()) << joinAll(errors);
  EXPECT_EQ(fdsAfter, fdsBefore);
  EXPECT_EQ(shmAfter, shmBefore);
  // A bound, not a measurement: 100 communicators' worth of rings and buffers would be far more.
  std::printf("memory held (%s) after shrink 2: %lld bytes, after shrink 101: %lld bytes\n",
              test::memoryHeldMeaning(), memBefore, memAfter);
  EXPECT_LT(memAfter - memBefore, 32ll << 20) << memBefore << " -> " << memAfter << " bytes";
}

TEST(Shrink, SplitCannotShrink) {
  auto store = makeHashStore();
  auto errors = runElastic(store, 2, membershipOptions(seconds(20)), [&](int, auto comm) {
    auto child = comm->split(0, 0);
    try {
      child->shrink();
    } catch (const Error& e) {
      require(e.code() == ErrorCode::kInvalidArgument, e.what());
      return;
    }
    throw std::runtime_error("a split communicator shrank");
  });
  EXPECT_TRUE(errors.empty()) << joinAll(errors);
}

}  // namespace
}  // namespace chorus::testing
