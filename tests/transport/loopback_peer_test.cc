// Which TCP links count as loopback: those links read on after a short read and take no
// read-ahead (tcp_link.h, loopback_), every other link keeps the calls per byte low.
#include "transport/tcp/endpoint.h"

#include "common/deadline.h"
#include "common/fd.h"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <chrono>

namespace chorus::transport::tcp {
namespace {

using namespace std::chrono_literals;

TEST(LoopbackPeer, ConnectionToLocalhostIsLoopbackOnBothEnds) {
  int port = 0;
  Fd listener = listenOn("127.0.0.1", 0, false, &port);
  ASSERT_GT(port, 0);
  Fd client = connectTo(net::resolveAddress("127.0.0.1:" + std::to_string(port)), 0, false,
                        Deadline::after(5000ms));
  Fd server(::accept(listener.get(), nullptr, nullptr));
  ASSERT_TRUE(server.valid());
  EXPECT_TRUE(isLoopbackPeer(client.get()));
  EXPECT_TRUE(isLoopbackPeer(server.get()));
}

TEST(LoopbackPeer, Ipv6LoopbackConnectionIsLoopbackOnBothEnds) {
  int port = 0;
  Fd listener = listenOn("::1", 0, false, &port);
  ASSERT_GT(port, 0);
  EXPECT_EQ(net::localOf(listener.get()).text(), "[::1]:" + std::to_string(port));
  Fd client = connectTo(net::resolveAddress("[::1]:" + std::to_string(port)), 0, false,
                        Deadline::after(5000ms));
  Fd server(::accept(listener.get(), nullptr, nullptr));
  ASSERT_TRUE(server.valid());
  EXPECT_EQ(net::peerOf(server.get()).ip(), "::1");
  EXPECT_TRUE(isLoopbackPeer(client.get()));
  EXPECT_TRUE(isLoopbackPeer(server.get()));
}

TEST(LoopbackPeer, ListenAddressFollowsTheStoreHostsFamily) {
  EXPECT_EQ(chooseListenAddress("", "::1"), "::1");
  EXPECT_EQ(chooseListenAddress("", "127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(chooseListenAddress("", "127.9.9.9"), "127.0.0.1");
  EXPECT_EQ(chooseListenAddress("", ""), "127.0.0.1");
  EXPECT_EQ(chooseListenAddress("lo", ""), "127.0.0.1");
  EXPECT_THROW(chooseListenAddress("no-such-if0", ""), Error);
}

TEST(LoopbackPeer, OtherSocketsAreNot) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  Fd a(fds[0]), b(fds[1]);
  EXPECT_FALSE(isLoopbackPeer(a.get()));  // not an IP socket
  Fd unconnected(::socket(AF_INET, SOCK_STREAM, 0));
  EXPECT_FALSE(isLoopbackPeer(unconnected.get()));  // no peer
  EXPECT_FALSE(isLoopbackPeer(-1));
}

}  // namespace
}  // namespace chorus::transport::tcp
