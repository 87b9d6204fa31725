// Reading many keys at once (Store::getMany): through the TCP store's MGET, a prefix store, a
// store without it, and a server older than MGET.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <chorus/communicator.hpp>
#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include "store/tcp_store_protocol.h"

namespace chorus {
namespace {

using namespace std::chrono_literals;
using Bytes = Store::Bytes;

Bytes bytesOf(const std::string& s) { return Bytes(s.begin(), s.end()); }
std::string stringOf(const Bytes& b) { return std::string(b.begin(), b.end()); }

std::vector<std::string> strings(const std::vector<Bytes>& values) {
  std::vector<std::string> out;
  for (const auto& v : values) out.push_back(stringOf(v));
  return out;
}

// Values in the order asked, once the last key arrives from another client.
void expectReadsInOrderAndWaits(Store& reader, Store& writer) {
  writer.set("a", bytesOf("1"));
  writer.set("c", Bytes{});
  std::thread late([&] {
    std::this_thread::sleep_for(50ms);
    writer.set("b", bytesOf("two"));
  });
  const auto start = std::chrono::steady_clock::now();
  const auto values = reader.getMany({"b", "a", "c", "a"}, 10s);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 40ms);
  late.join();
  EXPECT_EQ(strings(values), (std::vector<std::string>{"two", "1", "", "1"}));
  EXPECT_TRUE(reader.getMany({}, 1s).empty());
}

TEST(GetManyTest, TcpStoreReadsInOrderAndWaits) {
  TcpStoreServer server("127.0.0.1", 0);
  auto reader = makeTcpStore("127.0.0.1", server.port(), 5s);
  auto writer = makeTcpStore("127.0.0.1", server.port(), 5s);
  expectReadsInOrderAndWaits(*reader, *writer);
}

TEST(GetManyTest, PrefixOverTcpAndHashStoresReadInOrderAndWait) {
  TcpStoreServer server("127.0.0.1", 0);
  auto reader = makePrefixStore("p", makeTcpStore("127.0.0.1", server.port(), 5s));
  auto writer = makePrefixStore("p", makeTcpStore("127.0.0.1", server.port(), 5s));
  expectReadsInOrderAndWaits(*reader, *writer);
  auto hash = makeHashStore();
  auto prefixed = makePrefixStore("q", hash);
  expectReadsInOrderAndWaits(*prefixed, *prefixed);
  EXPECT_EQ(stringOf(hash->get("q/b", 1s)), "two");
}

TEST(GetManyTest, TimeoutNamesAMissingKey) {
  TcpStoreServer server("127.0.0.1", 0);
  auto store = makeTcpStore("127.0.0.1", server.port(), 5s);
  store->set("here", bytesOf("x"));
  const auto start = std::chrono::steady_clock::now();
  try {
    store->getMany({"here", "absent"}, 100ms);
    FAIL() << "getMany returned without the key";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("absent"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  // The connection that timed out was dropped; the client goes on.
  EXPECT_EQ(strings(store->getMany({"here", "here"}, 1s)), (std::vector<std::string>{"x", "x"}));
}

TEST(GetManyTest, AnswerOver64MiBIsRefusedAndTheStoreGoesOn) {
  TcpStoreServer server("127.0.0.1", 0);
  auto store = makeTcpStore("127.0.0.1", server.port(), 5s);
  store->set("big", Bytes(1 << 20, 7));
  const std::vector<std::string> keys(100, "big");  // 100 MiB if answered
  try {
    store->getMany(keys, 5s);
    FAIL() << "100 MiB answered";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("exceed 64 MiB"), std::string::npos) << e.what();
  }
  EXPECT_EQ(store->getMany({"big", "big"}, 5s).at(1).size(), size_t{1} << 20);
}

TEST(GetManyTest, RawMultiGetFrame) {
  TcpStoreServer server("127.0.0.1", 0);
  makeTcpStore("127.0.0.1", server.port(), 5s)->set("k", bytesOf("vv"));
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(server.port()));
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  // MGET (6), 1000 ms, keys "k", "k".
  const std::vector<uint8_t> request{0x43, 0x48, 0x53, 0x54, 1,   0, 6, 0, 22, 0,  0, 0,  //
                                     0xe8, 3,    0,    0,    0,   0, 0, 0,                //
                                     2,    0,    0,    0,                                 //
                                     1,    0,    0,    0,    'k', 1, 0, 0, 0,  'k'};
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  const std::vector<uint8_t> expected{0x43, 0x48, 0x53, 0x54, 1,   0,   0, 0, 16, 0, 0,   0,  //
                                      2,    0,    0,    0,                                    //
                                      2,    0,    0,    0,    'v', 'v', 2, 0, 0,  0, 'v', 'v'};
  std::vector<uint8_t> got(expected.size());
  size_t have = 0;
  while (have < got.size()) {
    pollfd p{fd, POLLIN, 0};
    ASSERT_GT(::poll(&p, 1, 5000), 0) << "no answer";
    ssize_t k = ::recv(fd, got.data() + have, got.size() - have, 0);
    ASSERT_GT(k, 0);
    have += static_cast<size_t>(k);
  }
  ::close(fd);
  EXPECT_EQ(got, expected);
}

// A server that knows GET only (as one older than MGET would, for the ops the client sends):
// it closes the connection on any other request. GET "k" answers "v:k".
class GetOnlyServer {
 public:
  GetOnlyServer() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listener_, 16) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("GetOnlyServer: cannot listen");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~GetOnlyServer() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  int port() const { return port_; }
  int refused() const { return refused_; }

 private:
  // One connection at a time, each until it closes or sends something other than GET.
  void serve() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) continue;
      while (!stop_ && answer(fd)) {
      }
      ::close(fd);
    }
  }
  bool readExact(int fd, uint8_t* data, size_t n) {
    size_t have = 0;
    while (have < n && !stop_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      ssize_t k = ::recv(fd, data + have, n - have, 0);
      if (k <= 0) return false;
      have += static_cast<size_t>(k);
    }
    return have == n;
  }
  bool answer(int fd) {
    uint8_t header[store::proto::kHeaderSize];
    if (!readExact(fd, header, sizeof(header))) return false;
    const auto h = store::proto::parseHeader(header);
    std::vector<uint8_t> body(h.body_len);
    if (!readExact(fd, body.data(), body.size())) return false;
    if (h.code != static_cast<uint8_t>(store::proto::Op::kGet)) {
      ++refused_;
      return false;
    }
    store::proto::Reader r(body.data(), body.size());
    r.i64();
    const std::string key = r.str();
    auto reply = store::proto::Writer(0).str("v:" + key).finish();
    return ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(reply.size());
  }

  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> refused_{0};
  std::thread thread_;
};

TEST(GetManyTest, FallsBackToGetsWhereTheServerHasNoMultiGet) {
  GetOnlyServer server;
  auto store = makeTcpStore("127.0.0.1", server.port(), 5s);
  EXPECT_EQ(strings(store->getMany({"a", "b"}, 5s)), (std::vector<std::string>{"v:a", "v:b"}));
  EXPECT_EQ(server.refused(), 1);
  // Remembered: no second MGET.
  EXPECT_EQ(strings(store->getMany({"c", "d"}, 5s)), (std::vector<std::string>{"v:c", "v:d"}));
  EXPECT_EQ(server.refused(), 1);
}

// A user's own store: the default reads key by key; an override is what the rendezvous calls.
class CountingStore final : public Store {
 public:
  explicit CountingStore(bool readsMany) : readsMany_(readsMany) {}
  void set(const std::string& key, const Bytes& value) override { inner_->set(key, value); }
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    ++gets;
    return inner_->get(key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override { return inner_->add(key, delta); }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(keys); }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    inner_->wait(keys, timeout);
  }
  std::vector<Bytes> getMany(const std::vector<std::string>& keys,
                             std::chrono::milliseconds timeout) override {
    ++manyCalls;
    if (!readsMany_) return Store::getMany(keys, timeout);
    return inner_->getMany(keys, timeout);
  }
  std::atomic<int> gets{0};
  std::atomic<int> manyCalls{0};

 private:
  bool readsMany_;
  std::shared_ptr<Store> inner_ = makeHashStore();
};

TEST(GetManyTest, DefaultReadsKeyByKeyUnderOneTimeout) {
  CountingStore store(false);
  store.set("a", bytesOf("1"));
  store.set("b", bytesOf("2"));
  EXPECT_EQ(strings(store.getMany({"b", "a"}, 1s)), (std::vector<std::string>{"2", "1"}));
  EXPECT_EQ(store.gets.load(), 2);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(store.getMany({"a", "never"}, 100ms), Error);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(GetManyTest, RendezvousCallsAUsersOverride) {
  constexpr int kRanks = 3;
  auto store = std::make_shared<CountingStore>(true);
  std::vector<std::thread> ranks;
  std::atomic<int> ok{0};
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      Options o;
      o.timeout = 20s;
      auto comm = Communicator::create(store, r, kRanks, o);
      float x = 1.0f;
      comm->allReduce(std::span<float>(&x, 1)).wait();
      if (x == float(kRanks)) ++ok;
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(ok.load(), kRanks);
  // The creation read the peers' records through the store's own many-key read.
  EXPECT_GT(store->manyCalls.load(), 0);
}

}  // namespace
}  // namespace chorus
