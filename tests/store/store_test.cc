// Tests of the rendezvous stores: hash, file, TCP (client + server), prefix, openStore, and the
// chorus-store tool.
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

namespace chorus {
namespace {

using namespace std::chrono_literals;
using Bytes = Store::Bytes;
using SteadyClock = std::chrono::steady_clock;

Bytes bytesOf(const std::string& s) { return Bytes(s.begin(), s.end()); }
std::string stringOf(const Bytes& b) { return std::string(b.begin(), b.end()); }

long long msSince(SteadyClock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start).count();
}

// Runs fn and returns the code of the chorus::Error it throws (kOk if it does not throw).
template <typename Fn>
ErrorCode errorOf(Fn&& fn, std::string* message = nullptr) {
  try {
    fn();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  return ErrorCode::kOk;
}

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/chorus-store-test-XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    if (made == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A port that was free a moment ago.
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A plain blocking socket connected to 127.0.0.1:port, for speaking raw bytes to the server.
class RawSocket {
 public:
  explicit RawSocket(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      throw std::runtime_error("raw connect failed");
    }
  }
  ~RawSocket() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void send(const std::vector<uint8_t>& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Reads exactly n bytes (fewer if the connection closes or the timeout passes).
  std::vector<uint8_t> recvExact(size_t n, std::chrono::milliseconds timeout) {
    std::vector<uint8_t> out(n);
    size_t got = 0;
    auto deadline = SteadyClock::now() + timeout;
    while (got < n && SteadyClock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    out.resize(got);
    return out;
  }
  // True when the server closes the connection within the timeout.
  bool closedByPeer(std::chrono::milliseconds timeout) {
    auto deadline = SteadyClock::now() + timeout;
    while (SteadyClock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        uint8_t buf[256];
        ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
        if (n <= 0) return true;
      }
    }
    return false;
  }

 private:
  int fd_ = -1;
};

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

TEST(TcpStoreTest, ManyConcurrentClients) {
  TcpStoreServer server("127.0.0.1", 0);
  constexpr int kClients = 32;
  std::vector<std::string> keys;
  for (int i = 0; i < kClients; ++i) keys.push_back("rank" + std::to_string(i));
  std::vector<std::future<int64_t>> results;
  for (int i = 0; i < kClients; ++i) {
    results.push_back(std::async(std::launch::async, [&, i] {
      auto s = makeTcpStore("127.0.0.1", server.port(), 5s);
      s->set(keys[i], bytesOf(std::to_string(i)));
      int64_t last = 0;
      for (int j = 0; j < 20; ++j) last = s->add("count", 1);
      s->wait(keys, 5s);
      int64_t sum = 0;
      for (int j = 0; j < kClients; ++j) sum += std::stoll(stringOf(s->get(keys[j], 1s)));
      EXPECT_EQ(sum, kClients * (kClients - 1) / 2);
      return last;
    }));
  }
  int64_t max_seen = 0;
  for (auto& r : results) max_seen = std::max(max_seen, r.get());
  EXPECT_EQ(max_seen, kClients * 20);
  EXPECT_EQ(makeTcpStore("127.0.0.1", server.port(), 1s)->add("count", 0), kClients * 20);
}

TEST(TcpStoreTest, ClientStartedBeforeServerRetries) {
  int port = freePort();
  std::unique_ptr<TcpStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(300ms);
    server = std::make_unique<TcpStoreServer>("127.0.0.1", port);
  });
  auto start = SteadyClock::now();
  auto s = makeTcpStore("127.0.0.1", port, 5s);
  EXPECT_GE(msSince(start), 250);
  starter.join();
  s->set("k", bytesOf("v"));
  EXPECT_EQ(stringOf(s->get("k", 1s)), "v");
}

TEST(TcpStoreTest, ConnectTimesOutWithoutServer) {
  int port = freePort();
  auto start = SteadyClock::now();
  std::string message;
  EXPECT_EQ(errorOf([&] { makeTcpStore("127.0.0.1", port, 200ms); }, &message),
            ErrorCode::kTimeout);
  auto waited = msSince(start);
  EXPECT_GE(waited, 190);
  EXPECT_LT(waited, 1000);
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
}

TEST(TcpStoreTest, ServerDestroyedWhileClientWaits) {
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
  int port = server->port();
  auto s = makeTcpStore("127.0.0.1", port, 5s);
  auto start = SteadyClock::now();
  auto waiter = std::async(std::launch::async, [&] {
    std::string message;
    ErrorCode code = errorOf([&] { s->get("never", 10s); }, &message);
    return std::make_pair(code, message);
  });
  std::this_thread::sleep_for(100ms);
  auto destroy_start = SteadyClock::now();
  server.reset();
  EXPECT_LT(msSince(destroy_start), 1000) << "server destructor is slow";
  ASSERT_EQ(waiter.wait_for(3s), std::future_status::ready) << "client hangs";
  auto [code, message] = waiter.get();
  EXPECT_EQ(code, ErrorCode::kPeerFailure) << message;
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
  EXPECT_LT(msSince(start), 2000);
}

TEST(TcpStoreTest, ServerDestructorReturnsPromptlyWithClientsConnected) {
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
  std::vector<std::shared_ptr<Store>> clients;
  int port = server->port();
  for (int i = 0; i < 4; ++i) clients.push_back(makeTcpStore("127.0.0.1", port, 200ms));
  clients[0]->set("k", {});
  auto start = SteadyClock::now();
  server.reset();
  EXPECT_LT(msSince(start), 500);
  // With the server gone, calls fail (the client tries to reconnect until its timeout).
  start = SteadyClock::now();
  EXPECT_EQ(errorOf([&] { clients[1]->set("k", {}); }), ErrorCode::kTimeout);
  EXPECT_LT(msSince(start), 1000);
  // A new server on the same port: clients reconnect on their next call.
  TcpStoreServer again("127.0.0.1", port);
  clients[0]->set("k", bytesOf("back"));
  EXPECT_EQ(stringOf(clients[1]->get("k", 1s)), "back");
}

TEST(TcpStoreTest, GarbageAndOversizedFramesCloseOnlyThatClient) {
  TcpStoreServer server("127.0.0.1", 0);
  auto good = makeTcpStore("127.0.0.1", server.port(), 2s);
  good->set("before", bytesOf("1"));

  // Random bytes.
  RawSocket garbage(server.port());
  std::vector<uint8_t> junk(200);
  std::mt19937 rng(7);
  for (auto& b : junk) b = static_cast<uint8_t>(rng());
  garbage.send(junk);

  // Valid magic and version, but a 4 GiB body.
  RawSocket oversized(server.port());
  std::vector<uint8_t> huge = {0x43, 0x48, 0x53, 0x54, 1, 0, 1, 0, 0xff, 0xff, 0xff, 0xff};
  oversized.send(huge);

  // Valid header, unknown op.
  RawSocket bad_op(server.port());
  bad_op.send({0x43, 0x48, 0x53, 0x54, 1, 0, 99, 0, 0, 0, 0, 0});

  // A SET whose body does not parse (key length points past the end).
  RawSocket bad_body(server.port());
  bad_body.send({0x43, 0x48, 0x53, 0x54, 1, 0, 1, 0, 4, 0, 0, 0, 0xff, 0xff, 0, 0});

  // An HTTP request.
  RawSocket http(server.port());
  std::string get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  http.send(bytesOf(get));

  EXPECT_TRUE(garbage.closedByPeer(2s));
  EXPECT_TRUE(oversized.closedByPeer(2s));
  EXPECT_TRUE(bad_op.closedByPeer(2s));
  EXPECT_TRUE(bad_body.closedByPeer(2s));
  EXPECT_TRUE(http.closedByPeer(2s));

  // Half a frame, then hang up.
  {
    RawSocket partial(server.port());
    partial.send({0x43, 0x48, 0x53, 0x54, 1, 0});
  }

  // A client parked on a key that then disconnects is forgotten.
  {
    RawSocket parked(server.port());
    store::proto::Writer w(static_cast<uint8_t>(store::proto::Op::kGet));
    w.i64(10000).str("parked-key");
    parked.send(w.finish());
    std::this_thread::sleep_for(50ms);
  }
  std::this_thread::sleep_for(50ms);
  good->set("parked-key", bytesOf("v"));

  // Existing and new clients still work.
  EXPECT_EQ(stringOf(good->get("before", 1s)), "1");
  good->set("after", bytesOf("2"));
  auto fresh = makeTcpStore("127.0.0.1", server.port(), 2s);
  EXPECT_EQ(stringOf(fresh->get("after", 1s)), "2");
  EXPECT_EQ(stringOf(fresh->get("parked-key", 1s)), "v");
}

TEST(TcpStoreTest, RawClientSpeaksDocumentedProtocol) {
  // Checks the wire format documented in tcp_store_protocol.h byte for byte.
  TcpStoreServer server("127.0.0.1", 0);
  RawSocket raw(server.port());
  // ADD "n" += 5.
  raw.send({0x43, 0x48, 0x53, 0x54, 1,   0, 3, 0, 13, 0, 0, 0,  // magic, version, op, flags, len
            1,    0,    0,    0,    'n',                        // key
            5,    0,    0,    0,    0,   0, 0, 0});             // delta
  EXPECT_EQ(raw.recvExact(20, 2s),
            (std::vector<uint8_t>{0x43, 0x48, 0x53, 0x54, 1, 0, 0, 0, 8, 0,
                                  0,    0,    5,    0,    0, 0, 0, 0, 0, 0}));
  // GET "n" with a 1000 ms timeout: the counter is decimal text.
  raw.send({0x43, 0x48, 0x53, 0x54, 1,  0, 2, 0, 13, 0, 0, 0, 0xe8, 3, 0, 0, 0, 0, 0, 0,  //
            1,    0,    0,    0,    'n'});
  EXPECT_EQ(raw.recvExact(17, 2s), (std::vector<uint8_t>{0x43, 0x48, 0x53, 0x54, 1, 0, 0, 0, 5, 0,
                                                         0, 0, 1, 0, 0, 0, '5'}));
  // SET "t" = "x", then ADD on it: an error response with status kInvalidArgument.
  raw.send({0x43, 0x48, 0x53, 0x54, 1, 0, 1, 0, 10, 0, 0, 0, 1, 0, 0, 0, 't', 1, 0, 0, 0, 'x'});
  EXPECT_EQ(raw.recvExact(12, 2s),
            (std::vector<uint8_t>{0x43, 0x48, 0x53, 0x54, 1, 0, 0, 0, 0, 0, 0, 0}));
  raw.send(
      {0x43, 0x48, 0x53, 0x54, 1, 0, 3, 0, 13, 0, 0, 0, 1, 0, 0, 0, 't', 1, 0, 0, 0, 0, 0, 0, 0});
  auto header = raw.recvExact(12, 2s);
  ASSERT_EQ(header.size(), 12u);
  EXPECT_EQ(header[6], static_cast<uint8_t>(ErrorCode::kInvalidArgument));
  uint32_t len =
      header[8] | header[9] << 8 | header[10] << 16 | static_cast<uint32_t>(header[11]) << 24;
  EXPECT_GT(len, 4u);
  EXPECT_EQ(raw.recvExact(len, 2s).size(), len);
  // WAIT for "a", "zz" with a 0 ms timeout after "a" is set: kTimeout naming the missing key.
  raw.send({0x43, 0x48, 0x53, 0x54, 1, 0, 1, 0, 9, 0, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0, 0});
  EXPECT_EQ(raw.recvExact(12, 2s).size(), 12u);
  raw.send({0x43, 0x48, 0x53, 0x54, 1, 0, 5, 0, 23,  0, 0, 0, 0, 0,   0,  0, 0, 0, 0, 0,  //
            2,    0,    0,    0,    1, 0, 0, 0, 'a', 2, 0, 0, 0, 'z', 'z'});
  EXPECT_EQ(raw.recvExact(18, 2s), (std::vector<uint8_t>{0x43, 0x48, 0x53, 0x54, 1, 0, 2, 0, 6, 0,
                                                         0, 0, 2, 0, 0, 0, 'z', 'z'}));
}

TEST(TcpStoreTest, UnresponsiveServerTimesOut) {
  // A listening socket that never answers: the client's own deadline must fire.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  auto s = makeTcpStore("127.0.0.1", ntohs(addr.sin_port), 200ms);
  auto start = SteadyClock::now();
  EXPECT_EQ(errorOf([&] { s->get("k", 100ms); }), ErrorCode::kTimeout);
  auto waited = msSince(start);
  EXPECT_GE(waited, 290);
  EXPECT_LT(waited, 1000);
  start = SteadyClock::now();
  EXPECT_EQ(errorOf([&] { s->set("k", {}); }), ErrorCode::kTimeout);
  EXPECT_LT(msSince(start), 1000);
  ::close(fd);
}

TEST(TcpStoreTest, TimedOutGetDoesNotDisturbLaterCalls) {
  TcpStoreServer server("127.0.0.1", 0);
  auto s = makeTcpStore("127.0.0.1", server.port(), 2s);
  EXPECT_EQ(errorOf([&] { s->get("x", 50ms); }), ErrorCode::kTimeout);
  EXPECT_EQ(errorOf([&] { s->wait({"x", "y"}, 50ms); }), ErrorCode::kTimeout);
  s->set("x", bytesOf("late"));
  EXPECT_EQ(stringOf(s->get("x", 1s)), "late");
  EXPECT_EQ(s->add("c", 1), 1);
}

TEST(TcpStoreTest, LargeValuesAndLimit) {
  TcpStoreServer server("127.0.0.1", 0);
  auto s = makeTcpStore("127.0.0.1", server.port(), 5s);
  Bytes big(4 << 20, 0xab);
  s->set("big", big);
  EXPECT_EQ(s->get("big", 5s), big);
  Bytes too_big((64 << 20) + 1, 0);
  EXPECT_EQ(errorOf([&] { s->set("too-big", too_big); }), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(s->check({"too-big"}));
}

TEST(TcpStoreTest, BindsAllInterfacesAndHostnames) {
  TcpStoreServer any("0.0.0.0", 0);
  makeTcpStore("127.0.0.1", any.port(), 2s)->set("k", bytesOf("v"));
  EXPECT_EQ(stringOf(makeTcpStore("localhost", any.port(), 2s)->get("k", 1s)), "v");
  TcpStoreServer named("localhost", 0);
  EXPECT_GT(named.port(), 0);
  makeTcpStore("localhost", named.port(), 2s)->set("k", {});
}

TEST(TcpStoreTest, BindFailureThrowsSystemError) {
  TcpStoreServer first("127.0.0.1", 0);
  std::string message;
  EXPECT_EQ(errorOf([&] { TcpStoreServer second("127.0.0.1", first.port()); }, &message),
            ErrorCode::kSystem);
  EXPECT_NE(message.find(std::to_string(first.port())), std::string::npos) << message;
}

// ---------------------------------------------------------------------------------------------
// openStore.

TEST(OpenStoreTest, OpensTcpAndFileUrls) {
  TcpStoreServer server("127.0.0.1", 0);
  auto port = std::to_string(server.port());
  openStore("tcp://127.0.0.1:" + port, 2s)->set("k", bytesOf("v"));
  EXPECT_EQ(stringOf(openStore("tcp://localhost:" + port, 2s)->get("k", 1s)), "v");
  EXPECT_EQ(stringOf(openStore("tcp://127.0.0.1:" + port + "/", 2s)->get("k", 1s)), "v");

  TempDir dir;
  openStore("file://" + dir.path() + "/s", 1s)->set("k", bytesOf("f"));
  EXPECT_EQ(stringOf(makeFileStore(dir.path() + "/s")->get("k", 1s)), "f");
}

TEST(OpenStoreTest, RejectsBadUrls) {
  const std::vector<std::string> bad = {
      "",
      "tcp://",
      "tcp://127.0.0.1",
      "tcp://127.0.0.1:",
      "tcp://127.0.0.1:abc",
      "tcp://127.0.0.1:12ab",
      "tcp://127.0.0.1:-1",
      "tcp://127.0.0.1:0",
      "tcp://127.0.0.1:65536",
      "tcp://127.0.0.1:99999999999",
      "tcp://:29500",
      "tcp://::1:29500",
      "tcp://[::1:29500",
      "tcp//127.0.0.1:29500",
      "http://127.0.0.1:29500",
      "file://",
      "file://relative/path",
      "127.0.0.1:29500",
  };
  for (const auto& url : bad) {
    std::string message;
    EXPECT_EQ(errorOf([&] { openStore(url, 100ms); }, &message), ErrorCode::kInvalidArgument)
        << url;
    EXPECT_NE(message.find("\"" + url + "\""), std::string::npos) << message;
  }
}

// ---------------------------------------------------------------------------------------------
// FileStore.

TEST(FileStoreTest, AddAcrossProcessesIsExact) {
  TempDir dir;
  const std::string path = dir.path() + "/shared";
  constexpr int kAdds = 200;
  auto parent = makeFileStore(path);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 0;
    try {
      auto child = makeFileStore(path);
      for (int i = 0; i < kAdds; ++i) child->add("counter", 1);
      child->set("child-done", {});
    } catch (...) {
      rc = 1;
    }
    ::_exit(rc);
  }
  for (int i = 0; i < kAdds; ++i) parent->add("counter", 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  parent->wait({"child-done"}, 1s);
  EXPECT_EQ(parent->add("counter", 0), 2 * kAdds);
}

TEST(FileStoreTest, CreatesMissingDirectoriesAndLeavesNoTempFiles) {
  TempDir dir;
  const std::string path = dir.path() + "/a/b/c";
  auto s = makeFileStore(path);
  EXPECT_TRUE(std::filesystem::is_directory(path));
  for (int i = 0; i < 20; ++i) s->set("k" + std::to_string(i), Bytes(100, 1));
  s->add("n", 1);
  for (const auto& entry : std::filesystem::directory_iterator(path)) {
    EXPECT_EQ(entry.path().filename().string().rfind(".tmp", 0), std::string::npos) << entry.path();
  }
}

TEST(FileStoreTest, FailsOnUnusableDirectory) {
  TempDir dir;
  const std::string file = dir.path() + "/plain-file";
  std::FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  EXPECT_EQ(errorOf([&] { makeFileStore(file); }), ErrorCode::kSystem);
  EXPECT_EQ(errorOf([&] { makeFileStore(file + "/sub"); }), ErrorCode::kSystem);
}

// ---------------------------------------------------------------------------------------------
// The chorus-store tool.

#ifdef CHORUS_BIN_DIR
TEST(ChorusStoreToolTest, ServesUntilSigterm) {
  const std::string exe = CHORUS_BIN_DIR "/chorus-store/chorus-store";
  if (::access(exe.c_str(), X_OK) != 0) GTEST_SKIP() << exe << " is not built";
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    ::execl(exe.c_str(), exe.c_str(), "--host", "127.0.0.1", "--port", "0", nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  std::string line;
  char c = 0;
  pollfd p{out[0], POLLIN, 0};
  while (line.find('\n') == std::string::npos && ::poll(&p, 1, 5000) > 0 &&
         ::read(out[0], &c, 1) == 1) {
    line += c;
  }
  ::close(out[0]);
  const std::string prefix = "chorus-store listening on tcp://127.0.0.1:";
  ASSERT_EQ(line.rfind(prefix, 0), 0u) << line;
  int port = std::stoi(line.substr(prefix.size()));
  auto s = openStore("tcp://127.0.0.1:" + std::to_string(port), 2s);
  s->set("k", bytesOf("v"));
  EXPECT_EQ(stringOf(s->get("k", 1s)), "v");

  ::kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}
#endif

}  // namespace
}  // namespace chorus
