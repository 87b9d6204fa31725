// The socket toolkit that the store and the transport's setup share: how a transfer ends (done,
// timed out, peer closed) and the errno text.
#include "common/socket_io.h"
#include "common/errno_text.h"
#include "common/fd.h"

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

namespace chorus {
namespace {

using namespace std::chrono_literals;

struct SocketPair {
  Fd a, b;
  SocketPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    a.reset(fds[0]);
    b.reset(fds[1]);
  }
};

// More than a socket buffer holds, of no round size: both sides must loop.
TEST(SocketIo, MovesEveryByteAcrossManyCalls) {
  SocketPair p;
  setNonBlocking(p.a.get());
  std::vector<uint8_t> out((3u << 20) + 7);
  std::iota(out.begin(), out.end(), uint8_t{3});
  std::vector<uint8_t> in(out.size());
  IoResult received;
  std::thread reader(
      [&] { received = recvAll(p.b.get(), in.data(), in.size(), Deadline::after(10s)); });
  IoResult sent = sendAll(p.a.get(), out.data(), out.size(), Deadline::after(10s));
  reader.join();
  EXPECT_TRUE(sent.ok()) << sent.text();
  EXPECT_TRUE(received.ok()) << received.text();
  EXPECT_EQ(in, out);
}

TEST(SocketIo, ZeroBytesNeedNoPeer) {
  SocketPair p;
  p.b.reset();
  EXPECT_TRUE(sendAll(p.a.get(), nullptr, 0, Deadline::after(10ms)).ok());
  EXPECT_TRUE(recvAll(p.a.get(), nullptr, 0, Deadline::after(10ms)).ok());
}

TEST(SocketIo, SilentPeerTimesOutAtTheDeadline) {
  SocketPair p;
  uint8_t b[5];
  auto start = Clock::now();
  IoResult r = recvAll(p.a.get(), b, sizeof(b), Deadline::after(50ms));
  EXPECT_EQ(r.status, IoStatus::kTimeout);
  EXPECT_EQ(r.text(), "timed out");
  EXPECT_GE(Clock::now() - start, 50ms);
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST(SocketIo, ClosedPeerIsReportedAsClosed) {
  SocketPair p;
  uint8_t one = 1;
  ASSERT_TRUE(sendAll(p.b.get(), &one, 1, Deadline::after(1s)).ok());
  p.b.reset();
  uint8_t b[3];
  // One byte arrives, then the end of the stream: the transfer is incomplete.
  IoResult r = recvAll(p.a.get(), b, sizeof(b), Deadline::after(1s));
  EXPECT_EQ(r.status, IoStatus::kClosed) << r.text();
  IoResult s = sendAll(p.a.get(), b, sizeof(b), Deadline::after(1s));
  EXPECT_EQ(s.status, IoStatus::kClosed) << s.text();
  EXPECT_NE(s.text().find("connection closed"), std::string::npos) << s.text();
}

TEST(ErrnoText, NamesTheErrorFromAnyThread) {
  std::vector<std::thread> threads;
  std::vector<std::string> texts(8);
  for (size_t i = 0; i < texts.size(); ++i) {
    threads.emplace_back([&, i] { texts[i] = errnoText(i % 2 ? ECONNRESET : ENOENT); });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(texts[i], i % 2 ? "Connection reset by peer" : "No such file or directory");
  }
  EXPECT_FALSE(errnoText(123456).empty());
}

}  // namespace
}  // namespace chorus
