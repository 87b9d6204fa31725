#include "store/tcp_store_limits.h"

#include "common/env_vars.h"
#include "store/tcp_address.h"
#include "store/tcp_store_protocol.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>

namespace chorus::store {
namespace {

long long number(const char* name, long long fallback, long long lo, long long hi) {
  auto text = envVar(name);
  return text ? parseEnvNumber(name, *text, lo, hi) : fallback;
}

std::chrono::milliseconds seconds(const char* name, std::chrono::milliseconds fallback) {
  return std::chrono::seconds(number(name, fallback.count() / 1000, 1, 24 * 3600));
}

}  // namespace

ServerLimits ServerLimits::fromEnv() {
  ServerLimits l;
  l.maxKeyBytes = static_cast<size_t>(
      number("CHORUS_STORE_MAX_KEY", static_cast<long long>(l.maxKeyBytes), 1, 1 << 20));
  l.maxValueBytes = static_cast<size_t>(number(
      "CHORUS_STORE_MAX_VALUE", static_cast<long long>(l.maxValueBytes), 0, proto::kMaxBody - 16));
  l.maxConnections = static_cast<size_t>(
      number("CHORUS_STORE_MAX_CONNECTIONS", static_cast<long long>(l.maxConnections), 1, 1 << 20));
  l.frameTime = seconds("CHORUS_STORE_FRAME_TIMEOUT", l.frameTime);
  return l;
}

std::string peerAddressOf(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
  char ip[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, ip, sizeof(ip));
    return hostPort(ip, ntohs(v4->sin_port));
  }
  if (a.ss_family == AF_INET6) {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof(ip));
    return hostPort(ip, ntohs(v6->sin6_port));
  }
  return "?";
}

}  // namespace chorus::store
