// The etcd store beyond what every store does (store_test.cc): its URLs, the members it tries in
// turn, its errors when none answers, compare-and-set, and a communicator on it.
#include <gtest/gtest.h>
#include <chorus/chorus.hpp>
#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "harness/etcd_server.h"
#include "harness/thread_ranks.h"
#include "store/compare_set.h"
#include "store/etcd/base64.h"
#include "store/store_test_util.h"
#include "store/store_url.h"

namespace chorus {
namespace {

using namespace store_test;
using chorus::testing::EtcdServer;
using chorus::testing::freeLoopbackPort;

// A one-member etcd of its own for the test, or a skip saying why there is none.
#define START_ETCD_SKIP_CHECK() \
  std::string etcdMissing_;     \
  if (EtcdServer::binary(&etcdMissing_).empty()) GTEST_SKIP() << etcdMissing_

#define START_ETCD(name)                                                       \
  std::string etcdMissing_;                                                    \
  if (EtcdServer::binary(&etcdMissing_).empty()) GTEST_SKIP() << etcdMissing_; \
  EtcdServer name

TEST(EtcdUrlTest, MembersAndPrefix) {
  auto u = store::parseStoreUrl("etcd://h1:2379,[::1]:2380,h3/jobs/42/");
  EXPECT_EQ(u.kind, store::StoreUrl::Kind::kEtcd);
  ASSERT_EQ(u.endpoints.size(), 3u);
  EXPECT_EQ(u.endpoints[0].host, "h1");
  EXPECT_EQ(u.endpoints[0].port, 2379);
  EXPECT_EQ(u.endpoints[1].host, "::1");
  EXPECT_EQ(u.endpoints[1].port, 2380);
  EXPECT_EQ(u.endpoints[2].host, "h3");
  EXPECT_EQ(u.endpoints[2].port, 2379);  // etcd's client port when none is given
  EXPECT_EQ(u.path, "jobs/42");
  EXPECT_FALSE(u.tls);
  auto tls = store::parseStoreUrl("etcds://h1,h2:1/p");
  EXPECT_TRUE(tls.tls);
  EXPECT_EQ(tls.endpoints.size(), 2u);
  EXPECT_EQ(tls.path, "p");
  EXPECT_EQ(store::parseStoreUrl("etcd://h1:1").path, "chorus");
  EXPECT_EQ(store::parseStoreUrl("etcd://h1:1/").path, "chorus");
}

TEST(EtcdUrlTest, RejectsBadUrls) {
  for (const std::string url :
       {"etcd://", "etcd:///p", "etcd://h1:2379,,h2:2379/p", "etcd://h1:2379,/p", "etcd://h1:0/p",
        "etcd://h1:x/p", "etcd://::1:2379/p", "etcd://h1:2379//p", "etcd://h1:2379/a//b"}) {
    std::string message;
    EXPECT_EQ(errorOf([&] { store::parseStoreUrl(url); }, &message), ErrorCode::kInvalidArgument)
        << url;
    EXPECT_NE(message.find("\"" + url + "\""), std::string::npos) << message;
  }
}

TEST(EtcdBase64Test, RoundTripsAndRejects) {
  for (std::string s : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
    EXPECT_EQ(store::etcd::base64Decode(store::etcd::base64Encode(s)), s);
  }
  EXPECT_EQ(store::etcd::base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(store::etcd::base64Encode("fo"), "Zm8=");
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  EXPECT_EQ(store::etcd::base64Decode(store::etcd::base64Encode(all)), all);
  for (std::string bad : {"Zm9", "Zm9v!A==", "Z===", "Zm=v"}) {
    EXPECT_FALSE(store::etcd::base64Decode(bad).has_value()) << bad;
  }
}

TEST(EtcdStoreTest, NoMemberAnswersFailsWithinTheDeadlineNamingThem) {
  const int a = freeLoopbackPort();
  const int b = freeLoopbackPort();
  const std::string url =
      "etcd://127.0.0.1:" + std::to_string(a) + ",127.0.0.1:" + std::to_string(b) + "/job";
  std::string message;
  auto start = SteadyClock::now();
  EXPECT_EQ(errorOf([&] { openStore(url, 300ms); }, &message), ErrorCode::kTimeout);
  const auto took = msSince(start);
  EXPECT_GE(took, 290);
  EXPECT_LT(took, 1500);
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(a)), std::string::npos) << message;
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(b)), std::string::npos) << message;
  EXPECT_NE(message.find("no member answered"), std::string::npos) << message;
}

TEST(EtcdStoreTest, FirstMemberDeadIsPassedOver) {
  START_ETCD(etcd);
  const std::string dead = "127.0.0.1:" + std::to_string(freeLoopbackPort());
  auto store = openStore("etcd://" + dead + "," + etcd.endpoint() + "/dead-first", 5s);
  auto start = SteadyClock::now();
  for (int i = 0; i < 20; ++i) store->set("k" + std::to_string(i), bytesOf("v"));
  EXPECT_EQ(stringOf(store->get("k19", 1s)), "v");
  // After the first answer it keeps to the live member: no connect to the dead one per call.
  EXPECT_LT(msSince(start), 2000);
  EXPECT_EQ(store->add("n", 2), 2);
}

// Other writers keep the store moving while a rank waits: the wait falls back to watching from
// the revision it read at, and still sees the put (etcd delivers it within its 100 ms catch-up).
TEST(EtcdStoreTest, WaitWhileOthersKeepWriting) {
  START_ETCD(etcd);
  auto store = openStore(etcd.url("busy"), 5s);
  std::atomic<bool> stop{false};
  std::thread noise([&] {
    auto other = openStore(etcd.url("busy-other"), 5s);
    for (int i = 0; !stop; ++i) other->set("noise", bytesOf(std::to_string(i)));
  });
  std::thread writer([&] {
    std::this_thread::sleep_for(300ms);
    openStore(etcd.url("busy"), 5s)->set("late", bytesOf("here"));
  });
  auto start = SteadyClock::now();
  const std::string got = stringOf(store->get("late", 5s));
  const auto took = msSince(start);
  stop = true;
  writer.join();
  noise.join();
  EXPECT_EQ(got, "here");
  EXPECT_GE(took, 290);
  EXPECT_LT(took, 1500);
}

// A port whose connections hang, as a host cut off: a listening socket that never accepts, its
// queue filled.
class Blackhole {
 public:
  Blackhole() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd_, 0) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("blackhole socket failed");
    }
    port_ = ntohs(addr.sin_port);
    for (int i = 0; i < 4; ++i) {  // fill the accept queue; later connects are not answered
      int c = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      ::connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
      fillers_.push_back(c);
    }
  }
  ~Blackhole() {
    for (int c : fillers_) ::close(c);
    ::close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::vector<int> fillers_;
};

TEST(EtcdStoreTest, FirstMemberCutOffLeavesTimeForTheOthers) {
  START_ETCD(etcd);
  Blackhole cutOff;
  const std::string url =
      "etcd://127.0.0.1:" + std::to_string(cutOff.port()) + "," + etcd.endpoint() + "/cut-off";
  // A deadline of 1 s is shared between the two members: the live one still answers in time.
  auto start = SteadyClock::now();
  auto store = openStore(url, 1s);
  EXPECT_LT(msSince(start), 900);
  store->set("k", bytesOf("v"));
  EXPECT_EQ(stringOf(store->get("k", 1s)), "v");
}

TEST(EtcdStoreTest, LostClusterEndsAWaitWithinItsDeadline) {
  START_ETCD(etcd);
  auto store = openStore(etcd.url("lost"), 5s);
  store->set("here", bytesOf("x"));
  std::thread killer([&] {
    std::this_thread::sleep_for(100ms);
    etcd.kill();
  });
  std::string message;
  auto start = SteadyClock::now();
  EXPECT_EQ(errorOf([&] { store->get("never", 1500ms); }, &message), ErrorCode::kTimeout);
  killer.join();
  const auto took = msSince(start);
  EXPECT_GE(took, 1400);
  EXPECT_LT(took, 4000);
  EXPECT_NE(message.find(etcd.endpoint()), std::string::npos) << message;
  // A call that does not wait retries for the store's own timeout, then names the member.
  start = SteadyClock::now();
  EXPECT_EQ(errorOf([&] { openStore(etcd.url("lost"), 200ms); }, &message), ErrorCode::kTimeout);
  EXPECT_LT(msSince(start), 1500);
  EXPECT_NE(message.find(etcd.endpoint()), std::string::npos) << message;
}

TEST(EtcdStoreTest, SomethingElseOnThePortFailsWithinTheDeadlineNamingIt) {
  // A TCP store server on the port: it closes on what it cannot parse, as a wrong port would.
  TcpStoreServer server("127.0.0.1", 0);
  std::string message;
  auto start = SteadyClock::now();
  EXPECT_NE(
      errorOf([&] { openStore("etcd://127.0.0.1:" + std::to_string(server.port()) + "/x", 300ms); },
              &message),
      ErrorCode::kOk);
  EXPECT_LT(msSince(start), 1500);
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(server.port())), std::string::npos)
      << message;
}

// chorus-doctor --live reads a job's progress records from etcd as from any store.
TEST(EtcdStoreTest, DoctorLiveReadsAJobOnEtcd) {
  START_ETCD(etcd);
  const std::string doctor = CHORUS_BIN_DIR "/chorus-doctor/chorus-doctor";
  if (::access(doctor.c_str(), X_OK) != 0) GTEST_SKIP() << doctor << " is not built";
  const std::string url = etcd.url("doctor-job");
  std::vector<std::unique_ptr<Communicator>> comms(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      comms[static_cast<size_t>(r)] =
          Communicator::create(url, r, 2, chorus::testing::testOptions(20s));
      std::vector<int> v(8, 1);
      for (int i = 0; i < 3; ++i)
        comms[static_cast<size_t>(r)]->allReduce(std::span<int>(v)).wait();
    });
  }
  for (auto& t : ranks) t.join();
  ASSERT_TRUE(comms[0] && comms[1]);
  std::this_thread::sleep_for(1500ms);  // a progress record each (every second)
  std::string out;
  FILE* p = ::popen((doctor + " --live --store " + url + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  EXPECT_EQ(out.rfind("verdict: no problem found (2 ranks, 3 collectives completed", 0), 0u) << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
}

// compare-and-set, on every store that offers it.
enum class CasKind { kHash, kEtcd, kPrefixOverEtcd };

class CompareSetTest : public ::testing::TestWithParam<CasKind> {
 protected:
  void SetUp() override {
    if (GetParam() == CasKind::kHash) {
      hash_ = makeHashStore();
    } else {
      std::string why;
      if (EtcdServer::binary(&why).empty()) GTEST_SKIP() << why;
      etcd_ = std::make_unique<EtcdServer>();
    }
    store_ = open();
  }
  std::shared_ptr<Store> open() {
    switch (GetParam()) {
      case CasKind::kHash:
        return hash_;
      case CasKind::kEtcd:
        return openStore(etcd_->url("cas"), 5s);
      case CasKind::kPrefixOverEtcd:
        return makePrefixStore("job", openStore(etcd_->url("cas"), 5s));
    }
    return nullptr;
  }
  store::ComparesAndSets& cas(Store& s) {
    auto* c = store::compareSetOf(s);
    if (c == nullptr) throw std::runtime_error("no compare-and-set");
    return *c;
  }

  std::shared_ptr<Store> hash_;
  std::unique_ptr<EtcdServer> etcd_;
  std::shared_ptr<Store> store_;
};

TEST_P(CompareSetTest, SwapsOnlyOnTheExpectedValue) {
  auto& c = cas(*store_);
  auto r = c.compareSet("k", std::nullopt, bytesOf("first"));
  EXPECT_TRUE(r.swapped);
  EXPECT_EQ(stringOf(*r.current), "first");
  r = c.compareSet("k", std::nullopt, bytesOf("second"));  // exists already
  EXPECT_FALSE(r.swapped);
  EXPECT_EQ(stringOf(*r.current), "first");
  r = c.compareSet("k", bytesOf("other"), bytesOf("second"));
  EXPECT_FALSE(r.swapped);
  EXPECT_EQ(stringOf(*r.current), "first");
  r = c.compareSet("k", bytesOf("first"), bytesOf("second"));
  EXPECT_TRUE(r.swapped);
  EXPECT_EQ(stringOf(store_->get("k", 1s)), "second");
  r = c.compareSet("absent", bytesOf("x"), bytesOf("y"));
  EXPECT_FALSE(r.swapped);
  EXPECT_FALSE(r.current.has_value());
  EXPECT_FALSE(store_->check({"absent"}));
  // Empty and binary values compare as bytes.
  EXPECT_TRUE(c.compareSet("e", std::nullopt, {}).swapped);
  EXPECT_TRUE(c.compareSet("e", Bytes{}, Bytes{0, 255}).swapped);
  EXPECT_EQ(store_->get("e", 1s), (Bytes{0, 255}));
}

TEST_P(CompareSetTest, ExactlyOneOfManyWritersWins) {
  constexpr int kWriters = 8;
  std::atomic<int> wins{0};
  std::vector<std::string> seen(kWriters);
  std::vector<std::thread> threads;
  for (int t = 0; t < kWriters; ++t) {
    threads.emplace_back([&, t] {
      auto s = open();
      auto r = cas(*s).compareSet("leader", std::nullopt, bytesOf("w" + std::to_string(t)));
      wins += r.swapped;
      seen[static_cast<size_t>(t)] = stringOf(*r.current);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
  const std::string winner = stringOf(store_->get("leader", 1s));
  for (const auto& s : seen) EXPECT_EQ(s, winner);  // every loser learns who won
}

std::string casName(const ::testing::TestParamInfo<CasKind>& param) {
  switch (param.param) {
    case CasKind::kHash:
      return "Hash";
    case CasKind::kEtcd:
      return "Etcd";
    case CasKind::kPrefixOverEtcd:
      return "PrefixOverEtcd";
  }
  return "Unknown";
}

INSTANTIATE_TEST_SUITE_P(Stores, CompareSetTest,
                         ::testing::Values(CasKind::kHash, CasKind::kEtcd,
                                           CasKind::kPrefixOverEtcd),
                         casName);

TEST(CompareSetCapability, TcpStoresHaveNone) {
  TcpStoreServer server("127.0.0.1", 0);
  auto tcp = makeTcpStore("127.0.0.1", server.port(), 2s);
  EXPECT_EQ(store::compareSetOf(*tcp), nullptr);
  EXPECT_EQ(store::compareSetOf(*makePrefixStore("p", tcp)), nullptr);
  EXPECT_NE(store::compareSetOf(*makePrefixStore("p", makeHashStore())), nullptr);
}

// A job of 4 thread ranks on the etcd store: a communicator from the URL, then an all-reduce.
TEST(EtcdStoreTest, CommunicatorAndAllReduce) {
  START_ETCD(etcd);
  constexpr int kRanks = 4;
  const std::string url = etcd.url("allreduce-job");
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      try {
        auto comm = Communicator::create(url, r, kRanks, chorus::testing::testOptions(20s));
        std::vector<float> v(1000, static_cast<float>(r + 1));
        comm->allReduce(std::span<float>(v)).wait();
        for (float x : v) {
          if (x != 10.0f) throw std::runtime_error("sum " + std::to_string(x) + ", not 10");
        }
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

// ---------------------------------------------------------------------------------------------
// A cluster of 3 members on loopback: the leader is killed.

// The leader, once the cluster has one (a few elections of 100 ms at most).
int awaitLeader(const EtcdServer& etcd) {
  const auto until = SteadyClock::now() + 5s;
  for (;;) {
    if (int l = etcd.leader(); l >= 0 || SteadyClock::now() > until) return l;
    std::this_thread::sleep_for(20ms);
  }
}

// The URL with the leader listed first, so that the client starts on it and has to move.
std::string leaderFirstUrl(const EtcdServer& etcd, int leader, const std::string& prefix) {
  std::string members = etcd.endpoint(leader);
  for (int i = 0; i < etcd.members(); ++i) {
    if (i != leader) members += "," + etcd.endpoint(i);
  }
  return "etcd://" + members + "/" + prefix;
}

TEST(EtcdClusterTest, LeaderKilledWhileWritingAndWaiting) {
  std::string why;
  if (EtcdServer::binary(&why).empty()) GTEST_SKIP() << why;
  EtcdServer etcd(3);
  const int leader = awaitLeader(etcd);
  ASSERT_GE(leader, 0);
  auto store = openStore(leaderFirstUrl(etcd, leader, "failover"), 5s);
  store->set("before", bytesOf("1"));
  auto waiter = std::async(std::launch::async, [&] {
    return stringOf(openStore(leaderFirstUrl(etcd, leader, "failover"), 5s)->get("after", 5s));
  });
  std::this_thread::sleep_for(50ms);
  etcd.kill(leader);
  auto start = SteadyClock::now();
  long long slowest = 0;
  for (int i = 0; i < 20; ++i) {
    auto one = SteadyClock::now();
    EXPECT_EQ(store->add("count", 1), i + 1);
    slowest = std::max(slowest, msSince(one));
  }
  store->set("after", bytesOf("2"));
  ::testing::Test::RecordProperty("slowest_add_after_kill_ms", static_cast<int>(slowest));
  ::testing::Test::RecordProperty("twenty_adds_after_kill_ms", static_cast<int>(msSince(start)));
  EXPECT_EQ(waiter.get(), "2");
  EXPECT_EQ(stringOf(store->get("before", 1s)), "1");
  // A new leader within etcd's election timeout (100 ms here) and the client's move to another
  // member: well under a second.
  EXPECT_LT(slowest, 1500) << "slowest add after the kill";
  EXPECT_LT(msSince(start), 3000);
  EXPECT_GE(awaitLeader(etcd), 0);
  EXPECT_NE(etcd.leader(), leader);
}

TEST(EtcdClusterTest, RendezvousSurvivesTheLeaderKilledDuringIt) {
  std::string why;
  if (EtcdServer::binary(&why).empty()) GTEST_SKIP() << why;
  EtcdServer etcd(3);
  const int leader = awaitLeader(etcd);
  ASSERT_GE(leader, 0);
  constexpr int kRanks = 4;
  const std::string url = leaderFirstUrl(etcd, leader, "rendezvous-failover");
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      try {
        // Rank 3 comes late, so that the kill falls inside the rendezvous of the others.
        if (r == kRanks - 1) std::this_thread::sleep_for(200ms);
        auto comm = Communicator::create(url, r, kRanks, chorus::testing::testOptions(20s));
        std::vector<int> v(64, r);
        comm->allReduce(std::span<int>(v)).wait();
        if (v[0] != 6) throw std::runtime_error("sum " + std::to_string(v[0]) + ", not 6");
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  std::this_thread::sleep_for(100ms);
  etcd.kill(leader);
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

// ---------------------------------------------------------------------------------------------
// etcds://: members that serve HTTPS and ask for a client certificate.

// Sets the CHORUS_ETCD_* variables for the scope of a test.
class EtcdTlsEnv {
 public:
  EtcdTlsEnv(const std::string& ca, const std::string& cert, const std::string& key) {
    set("CHORUS_ETCD_CA", ca);
    set("CHORUS_ETCD_CERT", cert);
    set("CHORUS_ETCD_KEY", key);
  }
  ~EtcdTlsEnv() {
    for (const char* name : {"CHORUS_ETCD_CA", "CHORUS_ETCD_CERT", "CHORUS_ETCD_KEY"}) {
      ::unsetenv(name);
    }
  }

 private:
  static void set(const char* name, const std::string& value) {
    if (value.empty()) {
      ::unsetenv(name);
    } else {
      ::setenv(name, value.c_str(), 1);
    }
  }
};

bool haveOpenssl() { return std::system("command -v openssl >/dev/null 2>&1") == 0; }

TEST(EtcdTlsTest, StoreAndCommunicatorOverHttps) {
  START_ETCD_SKIP_CHECK();
  if (!haveOpenssl()) GTEST_SKIP() << "no openssl command to make the test certificates";
  EtcdServer etcd(1, 10s, /*tls=*/true);
  EtcdTlsEnv env(etcd.caFile(), etcd.clientCert(), etcd.clientKey());
  auto store = openStore(etcd.url("tls"), 5s);
  store->set("k", bytesOf("over https"));
  EXPECT_EQ(stringOf(openStore(etcd.url("tls"), 5s)->get("k", 1s)), "over https");
  EXPECT_EQ(store->add("n", 5), 5);
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        auto comm =
            Communicator::create(etcd.url("tls-job"), r, 2, chorus::testing::testOptions(20s));
        std::vector<int> v(8, r + 1);
        comm->allReduce(std::span<int>(v)).wait();
        if (v[0] != 3) throw std::runtime_error("wrong sum");
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(EtcdTlsTest, UnverifiedMemberOrMissingClientCertificateFailsNamingIt) {
  START_ETCD_SKIP_CHECK();
  if (!haveOpenssl()) GTEST_SKIP() << "no openssl command to make the test certificates";
  EtcdServer etcd(1, 10s, /*tls=*/true);
  std::string message;
  {
    // The system's CAs do not know the test CA: refused at once, not retried.
    EtcdTlsEnv env("", etcd.clientCert(), etcd.clientKey());
    auto start = SteadyClock::now();
    EXPECT_EQ(errorOf([&] { openStore(etcd.url("tls"), 3s); }, &message), ErrorCode::kSystem);
    EXPECT_LT(msSince(start), 1000);
    EXPECT_NE(message.find("https://" + etcd.endpoint()), std::string::npos) << message;
  }
  {
    // No client certificate: etcd refuses the handshake; retried within the deadline.
    EtcdTlsEnv env(etcd.caFile(), "", "");
    auto start = SteadyClock::now();
    EXPECT_EQ(errorOf([&] { openStore(etcd.url("tls"), 300ms); }, &message), ErrorCode::kTimeout);
    EXPECT_LT(msSince(start), 1500);
    EXPECT_NE(message.find(etcd.endpoint()), std::string::npos) << message;
    EXPECT_NE(message.find("no client certificate"), std::string::npos) << message;
  }
  {
    EtcdTlsEnv env(etcd.caFile(), etcd.clientCert(), "");
    EXPECT_EQ(errorOf([&] { openStore(etcd.url("tls"), 1s); }, &message),
              ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find("CHORUS_ETCD_KEY"), std::string::npos) << message;
  }
  {
    // TLS files for a plain-HTTP URL: said, not ignored.
    EtcdTlsEnv env(etcd.caFile(), "", "");
    EXPECT_EQ(errorOf([&] { openStore("etcd://" + etcd.endpoint() + "/x", 1s); }, &message),
              ErrorCode::kInvalidArgument);
    EXPECT_NE(message.find("etcds://"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace chorus
