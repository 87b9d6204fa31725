// The rendezvous stores' common contract, run against every kind of store: hash, file, TCP,
// prefix and etcd (tcp_file_store_test.cc has what is particular to the TCP and file stores,
// openStore and chorus-store).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include "harness/etcd_server.h"
#include "store/tcp_store_protocol.h"

#include "store/store_test_util.h"

namespace chorus {
namespace {

using namespace store_test;

// ---------------------------------------------------------------------------------------------
// Tests run against every kind of store.

enum class Kind { kHash, kFile, kTcp, kPrefixHash, kPrefixTcp, kEtcd, kPrefixEtcd };

std::string nameOf(Kind kind) {
  switch (kind) {
    case Kind::kHash:
      return "Hash";
    case Kind::kFile:
      return "File";
    case Kind::kTcp:
      return "Tcp";
    case Kind::kPrefixHash:
      return "PrefixOverHash";
    case Kind::kPrefixTcp:
      return "PrefixOverTcp";
    case Kind::kEtcd:
      return "Etcd";
    case Kind::kPrefixEtcd:
      return "PrefixOverEtcd";
  }
  return "Unknown";
}

std::string kindName(const ::testing::TestParamInfo<Kind>& info) { return nameOf(info.param); }

// One etcd for every test of this binary (started at the first that needs it), each test under
// a prefix of its own; nullptr with *why set when there is no etcd binary.
chorus::testing::EtcdServer* sharedEtcd(std::string* why) {
  static std::string skipReason;
  static std::unique_ptr<chorus::testing::EtcdServer> server = [] {
    if (chorus::testing::EtcdServer::binary(&skipReason).empty()) {
      return std::unique_ptr<chorus::testing::EtcdServer>();
    }
    return std::make_unique<chorus::testing::EtcdServer>();
  }();
  *why = skipReason;
  return server.get();
}

std::string freshEtcdPrefix() {
  static std::atomic<int> next{0};
  return "store-test-" + std::to_string(::getpid()) + "-" + std::to_string(next++);
}
void PrintTo(Kind kind, std::ostream* os) { *os << nameOf(kind); }

class StoreTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    switch (GetParam()) {
      case Kind::kHash:
      case Kind::kPrefixHash:
        hash_ = makeHashStore();
        break;
      case Kind::kFile:
        dir_ = std::make_unique<TempDir>();
        break;
      case Kind::kTcp:
      case Kind::kPrefixTcp:
        server_ = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
        break;
      case Kind::kEtcd:
      case Kind::kPrefixEtcd: {
        std::string why;
        auto* etcd = sharedEtcd(&why);
        if (etcd == nullptr) GTEST_SKIP() << why;
        etcdUrl_ = etcd->url(freshEtcdPrefix());
        break;
      }
    }
    store_ = open();
  }

  // Another handle on the same underlying store (a new client or file store where it applies).
  std::shared_ptr<Store> open() {
    switch (GetParam()) {
      case Kind::kHash:
        return hash_;
      case Kind::kFile:
        return makeFileStore(dir_->path() + "/store");
      case Kind::kTcp:
        return makeTcpStore("127.0.0.1", server_->port(), 5s);
      case Kind::kPrefixHash:
        return makePrefixStore("job", hash_);
      case Kind::kPrefixTcp:
        return makePrefixStore("job", makeTcpStore("127.0.0.1", server_->port(), 5s));
      case Kind::kEtcd:
        return openStore(etcdUrl_, 5s);
      case Kind::kPrefixEtcd:
        return makePrefixStore("job", openStore(etcdUrl_, 5s));
    }
    return nullptr;
  }

  // The store without any prefix, for the isolation tests.
  std::shared_ptr<Store> base() {
    switch (GetParam()) {
      case Kind::kPrefixHash:
        return hash_;
      case Kind::kPrefixTcp:
        return makeTcpStore("127.0.0.1", server_->port(), 5s);
      case Kind::kPrefixEtcd:
        return openStore(etcdUrl_, 5s);
      default:
        return open();
    }
  }

  std::shared_ptr<Store> hash_;
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<TcpStoreServer> server_;
  std::string etcdUrl_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreTest, SetGetRoundTripsBinaryValues) {
  std::mt19937 rng(42);
  Bytes big(1 << 20);
  for (auto& b : big) b = static_cast<uint8_t>(rng());
  const std::vector<std::pair<std::string, Bytes>> cases = {
      {"empty", {}},
      {"zero", {0}},
      {"zeros", {0, 0, 0}},
      {"mixed", {0, 1, 0, 255, 128, 0}},
      {"text", bytesOf("hello")},
      {"big", big},
      {std::string("key\0with\0zeros", 14), {1, 2, 3}},
      {"a/b/c/../d", {4}},
      {"spaces and * ? : \\ \" | < > unicode \xc3\xa9", {5}},
      {"", {6}},
      {std::string(300, 'x'), {7}},   // longer than one file-name component once hex-encoded
      {std::string(1000, 'k'), {8}},  // several nested components
  };
  for (const auto& [key, value] : cases) store_->set(key, value);
  for (const auto& [key, value] : cases) {
    EXPECT_EQ(store_->get(key, 1s), value) << "key of size " << key.size();
  }
  // A second handle sees the same data.
  auto other = open();
  for (const auto& [key, value] : cases) EXPECT_EQ(other->get(key, 1s), value);
}

TEST_P(StoreTest, SetOverwrites) {
  store_->set("k", bytesOf("first"));
  store_->set("k", bytesOf("second value"));
  EXPECT_EQ(stringOf(store_->get("k", 1s)), "second value");
  store_->set("k", {});
  EXPECT_TRUE(store_->get("k", 1s).empty());
}

TEST_P(StoreTest, GetWaitsForSetFromAnotherThread) {
  auto writer_store = open();
  auto start = SteadyClock::now();
  std::thread writer([&] {
    std::this_thread::sleep_for(100ms);
    writer_store->set("late", bytesOf("value"));
  });
  Bytes got = store_->get("late", 5s);
  auto waited = msSince(start);
  writer.join();
  EXPECT_EQ(stringOf(got), "value");
  EXPECT_GE(waited, 90);
  EXPECT_LT(waited, 2000);
}

TEST_P(StoreTest, SameHandleSharedByWaiterAndSetter) {
  // One store object used by two threads: a blocked get must not hold up the set.
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    store_->set("shared", bytesOf("x"));
  });
  EXPECT_EQ(stringOf(store_->get("shared", 5s)), "x");
  writer.join();
}

TEST_P(StoreTest, HugeTimeoutMeansWaitForever) {
  std::thread writer([&] {
    std::this_thread::sleep_for(20ms);
    open()->set("eventually", bytesOf("v"));
    open()->set("also", {});
  });
  EXPECT_EQ(stringOf(store_->get("eventually", std::chrono::milliseconds::max())), "v");
  store_->wait({"eventually", "also"}, std::chrono::hours(24 * 365 * 1000));
  writer.join();
}

TEST_P(StoreTest, GetTimesOut) {
  auto start = SteadyClock::now();
  std::string message;
  EXPECT_EQ(errorOf([&] { store_->get("missing", 100ms); }, &message), ErrorCode::kTimeout);
  auto waited = msSince(start);
  EXPECT_GE(waited, 95);
  EXPECT_LT(waited, 600);
  EXPECT_NE(message.find("missing"), std::string::npos) << message;
  // The store still works after a timeout.
  store_->set("missing", bytesOf("now here"));
  EXPECT_EQ(stringOf(store_->get("missing", 1s)), "now here");
}

TEST_P(StoreTest, WaitTimesOut) {
  store_->set("present", {});
  auto start = SteadyClock::now();
  EXPECT_EQ(errorOf([&] { store_->wait({"present", "absent"}, 100ms); }), ErrorCode::kTimeout);
  auto waited = msSince(start);
  EXPECT_GE(waited, 95);
  EXPECT_LT(waited, 600);
}

TEST_P(StoreTest, ZeroTimeoutOnPresentKeySucceeds) {
  store_->set("here", bytesOf("v"));
  EXPECT_EQ(stringOf(store_->get("here", 0ms)), "v");
  store_->wait({"here"}, 0ms);
  EXPECT_EQ(errorOf([&] { store_->get("not-here", 0ms); }), ErrorCode::kTimeout);
}

TEST_P(StoreTest, AddFromManyThreadsIsExact) {
  constexpr int kThreads = 8;
  constexpr int kAdds = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto s = t % 2 == 0 ? store_ : open();  // shared and separate handles
      for (int i = 0; i < kAdds; ++i) s->add("counter", 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store_->add("counter", 0), kThreads * kAdds);
  EXPECT_EQ(store_->add("counter", -5), kThreads * kAdds - 5);
  EXPECT_EQ(stringOf(store_->get("counter", 1s)), std::to_string(kThreads * kAdds - 5));
}

TEST_P(StoreTest, AddReturnsNewValueAndStartsAtZero) {
  EXPECT_EQ(store_->add("n", 3), 3);
  EXPECT_EQ(store_->add("n", 4), 7);
  EXPECT_EQ(store_->add("neg", -2), -2);
  store_->set("preset", bytesOf("40"));
  EXPECT_EQ(store_->add("preset", 2), 42);
}

TEST_P(StoreTest, AddOnNonIntegerValueFails) {
  store_->set("text", bytesOf("not a number"));
  EXPECT_EQ(errorOf([&] { store_->add("text", 1); }), ErrorCode::kInvalidArgument);
  // The value is unchanged and the store keeps working.
  EXPECT_EQ(stringOf(store_->get("text", 1s)), "not a number");
  EXPECT_EQ(store_->add("other", 1), 1);
}

TEST_P(StoreTest, CheckAndWaitOnSeveralKeys) {
  EXPECT_TRUE(store_->check({}));
  EXPECT_FALSE(store_->check({"a"}));
  store_->set("a", {});
  EXPECT_TRUE(store_->check({"a"}));
  EXPECT_FALSE(store_->check({"a", "b", "c"}));

  auto writer_store = open();
  std::thread writer([&] {
    std::this_thread::sleep_for(30ms);
    writer_store->set("c", {});
    std::this_thread::sleep_for(30ms);
    writer_store->add("b", 1);
  });
  auto start = SteadyClock::now();
  store_->wait({"a", "b", "c"}, 5s);
  EXPECT_GE(msSince(start), 50);
  writer.join();
  EXPECT_TRUE(store_->check({"a", "b", "c"}));
  store_->wait({}, 0ms);
}

TEST_P(StoreTest, ManyWaitersWokenBySingleSet) {
  std::vector<std::future<Bytes>> waiters;
  for (int i = 0; i < 8; ++i) {
    waiters.push_back(std::async(std::launch::async, [this] { return open()->get("go", 5s); }));
  }
  std::this_thread::sleep_for(50ms);
  store_->set("go", bytesOf("now"));
  for (auto& w : waiters) EXPECT_EQ(stringOf(w.get()), "now");
}

TEST_P(StoreTest, PrefixStoresAreIsolated) {
  auto root = base();
  auto a = makePrefixStore("a", root);
  auto b = makePrefixStore("b", root);
  a->set("k", bytesOf("from a"));
  b->set("k", bytesOf("from b"));
  EXPECT_EQ(stringOf(a->get("k", 1s)), "from a");
  EXPECT_EQ(stringOf(b->get("k", 1s)), "from b");
  EXPECT_EQ(stringOf(root->get("a/k", 1s)), "from a");
  EXPECT_FALSE(root->check({"k"}));
  EXPECT_EQ(a->add("n", 2), 2);
  EXPECT_EQ(b->add("n", 5), 5);
  EXPECT_TRUE(a->check({"k", "n"}));
  EXPECT_FALSE(a->check({"k", "only-in-b"}));
  b->set("only-in-b", {});
  EXPECT_EQ(errorOf([&] { a->wait({"only-in-b"}, 50ms); }), ErrorCode::kTimeout);
  auto nested = makePrefixStore("x", a);
  nested->set("y", bytesOf("deep"));
  EXPECT_EQ(stringOf(root->get("a/x/y", 1s)), "deep");
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreTest,
                         ::testing::Values(Kind::kHash, Kind::kFile, Kind::kTcp, Kind::kPrefixHash,
                                           Kind::kPrefixTcp, Kind::kEtcd, Kind::kPrefixEtcd),
                         kindName);

// ---------------------------------------------------------------------------------------------
// TCP store.

}  // namespace
}  // namespace chorus
