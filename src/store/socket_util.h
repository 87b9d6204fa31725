// Small POSIX socket helpers for the TCP store (client and server).
#pragma once

#include <netdb.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "common/deadline.h"

namespace chorus::store {

// Owns a file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

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

void setNonBlocking(int fd);  // throws Error(kSystem)
void setNoDelay(int fd);      // best effort

enum class IoStatus { kOk, kTimeout, kClosed, kError };

// Sends/receives exactly n bytes on a non-blocking socket, polling until the deadline.
// On kError, *err holds errno.
IoStatus sendAll(int fd, const void* data, size_t n, const Deadline& deadline, int* err);
IoStatus recvAll(int fd, void* data, size_t n, const Deadline& deadline, int* err);

}  // namespace chorus::store
