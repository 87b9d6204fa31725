#include "store/tcp_address.h"

#include "common/errno_text.h"

#include <netinet/in.h>

#include <cerrno>

namespace chorus::store {

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

}  // namespace chorus::store
