// The membership agreement on a store with compare-and-set (the in-process store here; etcd in
// tests/store) against one without (the counter elections of the TCP store): a participant that
// won an election and died no longer stops the others, and stores without compare-and-set keep
// the counters.
#include "store/compare_set.h"
#include "core/elastic_keys.h"
#include "harness/etcd_server.h"
#include "membership/membership_harness.h"

#include <gtest/gtest.h>

namespace chorus::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Forwards to a store and hides its compare-and-set, as a TCP store has none.
class WithoutCompareSet final : public Store {
 public:
  explicit WithoutCompareSet(std::shared_ptr<Store> inner) : inner_(std::move(inner)) {}
  void set(const std::string& key, const Bytes& value) override { inner_->set(key, value); }
  Bytes get(const std::string& key, milliseconds timeout) override {
    return inner_->get(key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override { return inner_->add(key, delta); }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(keys); }
  void wait(const std::vector<std::string>& keys, milliseconds timeout) override {
    inner_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<Store> inner_;
};

const std::string kAttempt = std::string(elastic_keys::kRoot) + "g1/a0/";

// 4 ranks, one shrink with nothing lost; the errors of the ranks.
std::vector<std::string> shrinkOnce(std::shared_ptr<Store> store, milliseconds timeout) {
  return runElastic(store, 4, membershipOptions(timeout), [&](int r, auto comm) {
    checkCollectives(*comm, {0, 1, 2, 3});
    auto next = comm->shrink();
    require(next->rank() == r && next->size() == 4 && next->generation() == 1,
            "membership changed");
    checkCollectives(*next, {0, 1, 2, 3});
  });
}

std::string joined(const std::vector<std::string>& errors) {
  std::string out;
  for (const auto& e : errors) out += e + "\n";
  return out;
}

// As if a participant had won both elections of attempt 0 (decider, outcome) and died at once:
// the counters are at 1 and nothing was written.
void electedAndDied(Store& store) {
  store.add(kAttempt + "decider", 1);
  store.add(kAttempt + "elect", 1);
}

TEST(MembershipCompareSet, ElectedParticipantThatDiedDoesNotStopTheOthers) {
  auto store = makeHashStore();
  ASSERT_NE(store::compareSetOf(*store), nullptr);
  electedAndDied(*store);
  auto errors = shrinkOnce(store, seconds(10));
  EXPECT_TRUE(errors.empty()) << joined(errors);
  EXPECT_TRUE(store->check({kAttempt + "decision", kAttempt + "outcome"}));
}

TEST(MembershipCompareSet, WithoutItTheCountersElect) {
  auto inner = makeHashStore();
  auto store = std::make_shared<WithoutCompareSet>(inner);
  auto errors = shrinkOnce(store, seconds(10));
  EXPECT_TRUE(errors.empty()) << joined(errors);
  // One decider and one outcome writer, elected by the counters every participant added to.
  EXPECT_GE(inner->add(kAttempt + "decider", 0), 1);
  EXPECT_GE(inner->add(kAttempt + "elect", 0), 1);
}

TEST(MembershipCompareSet, WithoutItADeadElectedParticipantStillStopsTheOthers) {
  // Today's behaviour on the TCP store, kept: the others wait for the decision until the
  // deadline and say so.
  auto store = std::make_shared<WithoutCompareSet>(makeHashStore());
  electedAndDied(*store);
  auto errors = shrinkOnce(store, seconds(1));
  ASSERT_EQ(errors.size(), 4u) << joined(errors);
  for (const auto& e : errors) EXPECT_NE(e.find("no agreement"), std::string::npos) << e;
}

TEST(MembershipCompareSet, ShrinkOnEtcd) {
  std::string why;
  if (EtcdServer::binary(&why).empty()) GTEST_SKIP() << why;
  EtcdServer etcd;
  auto store = openStore(etcd.url("membership"), seconds(5));
  ASSERT_NE(store::compareSetOf(*store), nullptr);
  electedAndDied(*store);
  auto errors = shrinkOnce(store, seconds(10));
  EXPECT_TRUE(errors.empty()) << joined(errors);
  EXPECT_TRUE(store->check({kAttempt + "decision", kAttempt + "outcome"}));
}

}  // namespace
}  // namespace chorus::testing
