#include "store/tcp_store_limits.h"

#include "store/tcp_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>

namespace chorus::store {

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
