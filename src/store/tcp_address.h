// Name resolution and address text for the TCP store (client and server), IPv4 and IPv6.
#pragma once

#include <netdb.h>

#include <memory>
#include <string>

namespace chorus::store {

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

// getaddrinfo for TCP. passive: for bind (an empty host means every interface).
// Returns null and sets *error (gai_strerror text) on failure; *transient when worth retrying.
AddrInfoPtr resolveTcp(const std::string& host, int port, bool passive, std::string* error,
                       bool* transient);

// "host:port", with brackets around an IPv6 literal.
std::string hostPort(const std::string& host, int port);

}  // namespace chorus::store
