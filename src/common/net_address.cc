#include "common/net_address.h"

#include "common/errno_text.h"

#include <chorus/error.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>

namespace chorus::net {

AddrInfoPtr resolveTcp(const std::string& host, int port, bool passive, std::string* error,
                       bool* transient) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string service = std::to_string(port);
  addrinfo* result = nullptr;
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    if (rc == EAI_SYSTEM) {
      *error = "getaddrinfo: " + errnoText(errno);
    } else {
      *error = std::string("getaddrinfo: ") + gai_strerror(rc);
    }
    *transient = rc == EAI_AGAIN || rc == EAI_SYSTEM || rc == EAI_MEMORY;
    return nullptr;
  }
  return AddrInfoPtr(result);
}

std::string hostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

bool splitHostPort(std::string_view text, std::string* host, int* port) {
  std::string_view h;
  std::string_view p;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || text.substr(close + 1, 1) != ":") return false;
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return false;
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
    if (h.find(':') != std::string_view::npos) return false;
  }
  if (h.empty() || p.empty() || p.size() > 5) return false;
  int value = 0;
  for (char c : p) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  if (value < 1 || value > 65535) return false;
  *host = std::string(h);
  *port = value;
  return true;
}

std::string SocketAddress::ip() const {
  char text[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, text,
              sizeof(text));
  } else if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, text,
              sizeof(text));
  }
  return text;
}

int SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  }
  return 0;
}

std::string SocketAddress::text() const {
  if (family() != AF_INET && family() != AF_INET6) return "?";
  return hostPort(ip(), port());
}

bool SocketAddress::loopback() const {
  if (family() == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr) >> 24) == 127;
  }
  if (family() == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
  }
  return false;
}

bool numericAddress(const std::string& ip, int port, SocketAddress* out) {
  SocketAddress a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    a.length = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    a.length = sizeof(sockaddr_in6);
  } else {
    return false;
  }
  *out = a;
  return true;
}

SocketAddress resolveAddress(const std::string& hostPortText) {
  std::string host;
  int port = 0;
  if (!splitHostPort(hostPortText, &host, &port)) {
    throw Error(ErrorCode::kInvalidArgument,
                "address '" + hostPortText + "' is not host:port or [IPv6]:port");
  }
  SocketAddress a;
  if (numericAddress(host, port, &a)) return a;
  std::string error;
  bool transient = false;
  AddrInfoPtr found = resolveTcp(host, port, false, &error, &transient);
  if (!found || found->ai_addrlen > sizeof(a.storage)) {
    throw Error(ErrorCode::kInvalidArgument,
                "cannot resolve address '" + hostPortText + "': " + error);
  }
  std::memcpy(&a.storage, found->ai_addr, found->ai_addrlen);
  a.length = found->ai_addrlen;
  return a;
}

SocketAddress peerOf(int fd) {
  SocketAddress a;
  a.length = sizeof(a.storage);
  if (::getpeername(fd, a.get(), &a.length) != 0) return SocketAddress{};
  return a;
}

SocketAddress localOf(int fd) {
  SocketAddress a;
  a.length = sizeof(a.storage);
  if (::getsockname(fd, a.get(), &a.length) != 0) return SocketAddress{};
  return a;
}

}  // namespace chorus::net
