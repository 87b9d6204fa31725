// Communicator::join over thread-ranks: a newcomer replaces a lost rank at the next shrink
// (announced through chorus/elastic/expected_joiners, as an elastic launcher does), a newcomer
// that nobody admits times out, and the C API of membership changes.
#include "core/membership.h"
#include "harness/c_ranks.h"
#include "membership/membership_harness.h"

#include <chorus/chorus.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>

namespace chorus::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string joinAll(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

// The names checkCollectives uses: survivors keep their first rank, newcomers get 100 + rank.
std::vector<int> idsOf(const Communicator& comm) {
  std::vector<int> ids = comm.formerRanks();
  for (size_t r = 0; r < ids.size(); ++r) {
    if (ids[r] < 0) ids[r] = 100 + static_cast<int>(r);
  }
  return ids;
}

TEST(Join, ReplacementTakesTheNextMembership) {
  auto store = makeHashStore();
  const Options options = membershipOptions(seconds(20));
  // The launcher announces the replacement before starting it; it arrives late.
  store->add(membership::kExpectedJoinersKey, 1);
  auto newcomer = [&] {
    std::this_thread::sleep_for(milliseconds(300));
    auto comm = Communicator::join(store, options);
    require(comm->size() == 4 && comm->rank() == 3, "newcomer placed at " +
                                                        std::to_string(comm->rank()) + " of " +
                                                        std::to_string(comm->size()));
    require(comm->formerRanks() == std::vector<int>({0, 1, 3, -1}), "newcomer's formerRanks");
    require(comm->generation() == 1, "newcomer's generation");
    checkCollectives(*comm, idsOf(*comm));
  };
  auto errors =
      runElastic(store, 4, options,
                 [&](int r, auto comm) {
                   checkCollectives(*comm, {0, 1, 2, 3});
                   if (r == 2) return;  // lost: destroyed between collectives
                   try {
                     checkCollectives(*comm, {0, 1, 2, 3});
                     throw std::runtime_error("collectives went on without rank 2");
                   } catch (const Error&) {
                   }
                   auto next = comm->shrink();
                   require(next->size() == 4, "size " + std::to_string(next->size()));
                   require(next->formerRanks() == std::vector<int>({0, 1, 3, -1}), "formerRanks");
                   require(comm->failedRanks() == std::vector<int>({2}), "failedRanks");
                   require(next->joinersWaiting() == 0, "joiners still waiting");
                   checkCollectives(*next, idsOf(*next));
                 },
                 {newcomer});
  EXPECT_TRUE(errors.empty()) << joinAll(errors);
  auto change = store->get(membership::kLastChangeKey, seconds(1));
  EXPECT_EQ(std::string(change.begin(), change.end()),
            "generation=1 size=4 former=0,1,3,-1 lost=2 joined=1");
}

// A launcher that restarts lost ranks sees a death at the same moment as the survivors: their
// shrink() may be deciding before it announced the replacement. With the launcher's restarts
// published (restarts_left), the decider waits for the announcement, and the replacement is
// admitted at this membership change, not the next one.
TEST(Join, LateAnnouncementIsAwaitedWhileRestartsRemain) {
  auto store = makeHashStore();
  const Options options = membershipOptions(seconds(20));
  store->set(membership::kRestartsLeftKey, Store::Bytes{'1'});
  std::atomic<bool> lost{false};
  auto launcher = [&] {
    while (!lost) std::this_thread::sleep_for(milliseconds(5));
    // Later than the survivors see the death (their connections to rank 2 close at once).
    std::this_thread::sleep_for(milliseconds(400));
    store->add(membership::kExpectedJoinersKey, 1);
    store->set(membership::kRestartsLeftKey, Store::Bytes{'0'});
    auto comm = Communicator::join(store, options);
    require(comm->size() == 4 && comm->generation() == 1,
            "newcomer got size " + std::to_string(comm->size()) + ", generation " +
                std::to_string(comm->generation()));
    checkCollectives(*comm, idsOf(*comm));
  };
  auto errors = runElastic(store, 4, options,
                           [&](int r, auto comm) {
                             checkCollectives(*comm, {0, 1, 2, 3});
                             if (r == 2) {
                               comm.reset();  // lost: its connections close
                               lost = true;
                               return;
                             }
                             try {
                               checkCollectives(*comm, {0, 1, 2, 3});
                             } catch (const Error&) {
                             }
                             auto next = comm->shrink();
                             require(next->formerRanks() == std::vector<int>({0, 1, 3, -1}),
                                     "survivors got " + std::to_string(next->size()) +
                                         " ranks: the replacement was not admitted");
                             checkCollectives(*next, idsOf(*next));
                           },
                           {launcher});
  EXPECT_TRUE(errors.empty()) << joinAll(errors);
}

// With restarts published but none left, a lost rank costs no wait.
TEST(Join, NoWaitWithoutRestartsLeft) {
  auto store = makeHashStore();
  const Options options = membershipOptions(seconds(20));
  store->set(membership::kRestartsLeftKey, Store::Bytes{'0'});
  auto errors = runElastic(store, 3, options, [&](int r, auto comm) {
    checkCollectives(*comm, {0, 1, 2});
    if (r == 2) return;
    try {
      checkCollectives(*comm, {0, 1, 2});
    } catch (const Error&) {
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto next = comm->shrink();
    require(next->size() == 2, "size " + std::to_string(next->size()));
    // Well under the 2 s a launcher with restarts left would be given.
    require(std::chrono::steady_clock::now() - t0 < milliseconds(1800), "shrink waited");
  });
  EXPECT_TRUE(errors.empty()) << joinAll(errors);
}

// A spare (chorus-run --spares) waits while the job is full: under the launcher's cap
// (chorus/elastic/max_size) the running ranks do not count it as waiting and a membership change
// does not admit it (sparesWaiting() counts it); the change after a rank's loss does, into the
// lost rank's place.
TEST(Join, SpareWaitsForAHoleUnderTheCap) {
  auto store = makeHashStore();
  const Options options = membershipOptions(seconds(20));
  store->set(membership::kMaxSizeKey, Store::Bytes{'3'});
  auto spare = [&] {
    auto comm = Communicator::join(store, options);
    require(comm->generation() == 2,
            "spare admitted at generation " + std::to_string(comm->generation()) + ", not 2");
    require(comm->formerRanks() == std::vector<int>({0, 2, -1}), "spare's formerRanks");
    checkCollectives(*comm, idsOf(*comm));
  };
  auto errors = runElastic(
      store, 3, options,
      [&](int r, auto comm) {
        // Until the spare is in the queue (its ticket, then its record: as propose() reads).
        while (membership::joinersWaiting(*store) == 0) {
          std::this_thread::sleep_for(milliseconds(5));
        }
        require(comm->joinersWaiting() == 0, "a full job counts the spare as waiting");
        require(comm->sparesWaiting() == 1,
                "spares standing by: " + std::to_string(comm->sparesWaiting()) + ", not 1");
        auto full = comm->shrink();
        require(full->size() == 3 && full->formerRanks() == std::vector<int>({0, 1, 2}),
                "the full job admitted the spare");
        checkCollectives(*full, {0, 1, 2});
        if (r == 1) return;  // lost: destroyed between collectives
        try {
          checkCollectives(*full, {0, 1, 2});
          throw std::runtime_error("collectives went on without rank 1");
        } catch (const Error&) {
        }
        auto next = full->shrink();
        require(next->formerRanks() == std::vector<int>({0, 2, -1}),
                "the spare did not take rank 1's place: size " + std::to_string(next->size()));
        require(next->joinersWaiting() == 0, "joiners still waiting");
        require(next->sparesWaiting() == 0, "the admitted spare still counted as standing by");
        checkCollectives(*next, idsOf(*next));
      },
      {spare});
  EXPECT_TRUE(errors.empty()) << joinAll(errors);
}

// CHORUS_JOIN_WAIT (set by chorus-run for spares): 0 lets a newcomer wait past its timeout for
// the membership change that admits it; a value that is not a number of seconds is refused.
TEST(Join, JoinWaitFromTheEnvironment) {
  auto store = makeHashStore();
  ::setenv("CHORUS_JOIN_WAIT", "soon", 1);
  try {
    Communicator::join(store, membershipOptions(seconds(5)));
    ADD_FAILURE() << "join took CHORUS_JOIN_WAIT=soon";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("CHORUS_JOIN_WAIT"), std::string::npos) << e.what();
  }
  ::setenv("CHORUS_JOIN_WAIT", "0", 1);
  auto late = [&] {
    // Its own timeout is 200 ms; the ranks admit it after 800.
    auto comm = Communicator::join(store, membershipOptions(milliseconds(200)));
    require(comm->size() == 3, "newcomer got size " + std::to_string(comm->size()));
    checkCollectives(*comm, idsOf(*comm));
  };
  auto errors = runElastic(store, 2, membershipOptions(seconds(20)),
                           [&](int, auto comm) {
                             std::this_thread::sleep_for(milliseconds(800));
                             auto next = comm->shrink();
                             require(next->size() == 3, "size " + std::to_string(next->size()));
                             checkCollectives(*next, idsOf(*next));
                           },
                           {late});
  ::unsetenv("CHORUS_JOIN_WAIT");
  EXPECT_TRUE(errors.empty()) << joinAll(errors);
}

TEST(Join, NoMembershipChangeTimesOut) {
  auto store = makeHashStore();
  try {
    Communicator::join(store, membershipOptions(milliseconds(200)));
    FAIL() << "join returned without a membership change";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
  }
  // The withdrawn newcomer is not counted as waiting any more.
  EXPECT_EQ(membership::joinersWaiting(*store), 0);
}

TEST(MembershipCApi, ShrinkAndQueries) {
  runCRanks(3, [](chorus_comm* comm, const Fail& fail) {
    int count = -1;
    int ranks[8] = {};
    if (chorus_comm_failed_ranks(comm, ranks, 8, &count) != CHORUS_OK || count != 0) {
      fail("failed ranks before: " + std::to_string(count));
    }
    uint64_t generation = 99;
    if (chorus_comm_generation(comm, &generation) != CHORUS_OK || generation != 0) {
      fail("generation before");
    }
    if (chorus_comm_joiners_waiting(comm, &count) != CHORUS_OK || count != 0) fail("joiners");
    chorus_comm* next = nullptr;
    if (chorus_comm_shrink(comm, &next) != CHORUS_OK || next == nullptr) {
      fail(std::string("shrink: ") + chorus_last_error(comm));
      return;
    }
    if (chorus_comm_generation(next, &generation) != CHORUS_OK || generation != 1) {
      fail("generation after");
    }
    if (chorus_comm_former_ranks(next, ranks, 8, &count) != CHORUS_OK || count != 3 ||
        ranks[0] != 0 || ranks[1] != 1 || ranks[2] != 2) {
      fail("former ranks after");
    }
    // Too small an array: the count still says how many there are.
    if (chorus_comm_former_ranks(next, ranks, 1, &count) != CHORUS_OK || count != 3) {
      fail("former ranks, capacity 1");
    }
    if (chorus_comm_failed_ranks(next, nullptr, 4, &count) != CHORUS_ERR_INVALID_ARGUMENT) {
      fail("null ranks with capacity accepted");
    }
    if (chorus_comm_shrink(next, nullptr) != CHORUS_ERR_INVALID_ARGUMENT) fail("null out");
    long long x = chorus_comm_rank(next) + 1;
    if (chorus_all_reduce(next, &x, &x, 1, CHORUS_DTYPE_I64, CHORUS_OP_SUM) != CHORUS_OK ||
        x != 6) {
      fail("all_reduce after shrink");
    }
    if (chorus_barrier(comm) != CHORUS_ERR_ABORTED) fail("old communicator still usable");
    chorus_comm_destroy(next);
  });
}

TEST(MembershipCApi, JoinWithoutChangeTimesOut) {
  TcpStoreServer server("127.0.0.1", 0);
  chorus_options o{};
  o.struct_size = sizeof(o);
  o.timeout_ms = 200;
  chorus_comm* comm = nullptr;
  const std::string url = "tcp://127.0.0.1:" + std::to_string(server.port());
  EXPECT_EQ(chorus_comm_join(url.c_str(), &o, &comm), CHORUS_ERR_TIMEOUT)
      << chorus_last_error(nullptr);
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(chorus_comm_join(nullptr, &o, &comm), CHORUS_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace chorus::testing
