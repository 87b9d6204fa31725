// Addresses for the store and the links (common/net_address.h): "host:port" text in and out,
// IPv4 and IPv6, and which addresses are loopback.
#include "common/net_address.h"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <netinet/in.h>

#include <string>

namespace chorus::net {
namespace {

struct Split {
  bool ok;
  std::string host;
  int port;
};

Split split(const std::string& text) {
  Split s{false, "", 0};
  s.ok = splitHostPort(text, &s.host, &s.port);
  return s;
}

TEST(NetAddress, SplitsHostPortAndBracketedIpv6) {
  auto a = split("node-3:29500");
  EXPECT_TRUE(a.ok);
  EXPECT_EQ(a.host, "node-3");
  EXPECT_EQ(a.port, 29500);
  auto b = split("[::1]:1");
  EXPECT_TRUE(b.ok);
  EXPECT_EQ(b.host, "::1");
  EXPECT_EQ(b.port, 1);
  auto c = split("[fe80::1%eth0]:65535");
  EXPECT_TRUE(c.ok);
  EXPECT_EQ(c.host, "fe80::1%eth0");
  for (const char* bad : {"", "host", "host:", ":80", "host:0", "host:65536", "host:8x", "::1:80",
                          "[::1]", "[::1]80", "[::1:80", "[]:80", "host:123456"}) {
    EXPECT_FALSE(split(bad).ok) << bad;
  }
}

TEST(NetAddress, TextPutsBracketsAroundIpv6Only) {
  EXPECT_EQ(hostPort("10.0.0.1", 80), "10.0.0.1:80");
  EXPECT_EQ(hostPort("::1", 80), "[::1]:80");
  SocketAddress a;
  ASSERT_TRUE(numericAddress("::1", 4242, &a));
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(a.text(), "[::1]:4242");
  EXPECT_EQ(a.ip(), "::1");
  EXPECT_EQ(a.port(), 4242);
  ASSERT_TRUE(numericAddress("192.168.7.9", 7, &a));
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.text(), "192.168.7.9:7");
  EXPECT_FALSE(numericAddress("not-an-ip", 7, &a));
  EXPECT_EQ(SocketAddress{}.text(), "?");
}

TEST(NetAddress, LoopbackIsTheWholeIpv4NetAndIpv6One) {
  SocketAddress a;
  for (const char* ip : {"127.0.0.1", "127.4.5.6", "::1", "::ffff:127.0.0.1"}) {
    ASSERT_TRUE(numericAddress(ip, 1, &a)) << ip;
    EXPECT_TRUE(a.loopback()) << ip;
  }
  for (const char* ip : {"10.0.0.1", "128.0.0.1", "::2", "::ffff:10.0.0.1", "fe80::1"}) {
    ASSERT_TRUE(numericAddress(ip, 1, &a)) << ip;
    EXPECT_FALSE(a.loopback()) << ip;
  }
}

TEST(NetAddress, ResolvesLiteralsAndNamesAndSaysWhatFailed) {
  EXPECT_EQ(resolveAddress("[::1]:9").text(), "[::1]:9");
  EXPECT_EQ(resolveAddress("127.0.0.1:9").text(), "127.0.0.1:9");
  EXPECT_TRUE(resolveAddress("localhost:9").loopback());
  try {
    resolveAddress("::1:9");
    FAIL() << "an unbracketed IPv6 literal was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("[IPv6]:port"), std::string::npos) << e.what();
  }
  EXPECT_THROW(resolveAddress("no-such-host.invalid:9"), Error);
}

}  // namespace
}  // namespace chorus::net
