// The TCP store (clients, server limits, protocol, failures), openStore's URLs, the file store
// across processes, and the chorus-store tool.
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

#include "harness/first_line.h"
#include "store/store_test_util.h"

namespace chorus {
namespace {

using namespace store_test;

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
  const std::string line = chorus::testing::readFirstLine(out[0]);
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
