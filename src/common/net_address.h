// Socket addresses for every TCP user (the store's client and server, the transport's links):
// name resolution and "host:port" text, IPv4 and IPv6 alike ("[v6]:port" in text).
#pragma once

#include <netdb.h>
#include <sys/socket.h>

#include <memory>
#include <string>
#include <string_view>

namespace chorus::net {

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

// getaddrinfo for TCP, any family. passive: for bind (an empty host means every interface).
// Returns null and sets *error (gai_strerror text) on failure; *transient when worth retrying.
AddrInfoPtr resolveTcp(const std::string& host, int port, bool passive, std::string* error,
                       bool* transient);

// "host:port", with brackets around an IPv6 literal.
std::string hostPort(const std::string& host, int port);

// Splits "host:port" or "[v6]:port" (the host returned without brackets). False when the text
// has no port, a port outside 1-65535, or an unbracketed IPv6 literal.
bool splitHostPort(std::string_view text, std::string* host, int* port);

// One IPv4 or IPv6 socket address.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const { return storage.ss_family; }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* get() { return reinterpret_cast<sockaddr*>(&storage); }
  // The address without its port ("10.0.0.1", "::1"); empty for another family.
  std::string ip() const;
  int port() const;
  // "ip:port" or "[ip6]:port"; "?" for another family.
  std::string text() const;
  // 127.0.0.0/8 or ::1 (and an IPv4-mapped 127.x address).
  bool loopback() const;
};

// A numeric IPv4 or IPv6 address and a port; false when ip is neither.
bool numericAddress(const std::string& ip, int port, SocketAddress* out);

// "host:port" or "[v6]:port" resolved (a name: its first TCP address, any family).
// Throws Error(kInvalidArgument) naming the text.
SocketAddress resolveAddress(const std::string& hostPortText);

// The other end, or this end, of a socket; length 0 when unknown.
SocketAddress peerOf(int fd);
SocketAddress localOf(int fd);

}  // namespace chorus::net
