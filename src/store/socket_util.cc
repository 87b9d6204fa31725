#include "store/socket_util.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <chorus/error.hpp>

#include "store/store_util.h"

namespace chorus::store {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

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
      *error = std::string("getaddrinfo: ") + std::strerror(errno);
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

void setNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throwSystem("tcp store: fcntl(O_NONBLOCK)", errno);
  }
}

void setNoDelay(int fd) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

namespace {

// Waits for events on fd until the deadline. kOk when ready (or hung up: the next call tells).
IoStatus waitFor(int fd, short events, const Deadline& deadline, int* err) {
  while (true) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.remainingMs());
    if (rc > 0) return IoStatus::kOk;
    if (rc == 0) {
      if (deadline.expired()) return IoStatus::kTimeout;
      continue;
    }
    if (errno == EINTR) continue;
    *err = errno;
    return IoStatus::kError;
  }
}

}  // namespace

IoStatus sendAll(int fd, const void* data, size_t n, const Deadline& deadline, int* err) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t sent = ::send(fd, p, n, MSG_NOSIGNAL);
    if (sent > 0) {
      p += sent;
      n -= static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      IoStatus s = waitFor(fd, POLLOUT, deadline, err);
      if (s != IoStatus::kOk) return s;
      continue;
    }
    *err = sent < 0 ? errno : EPIPE;
    return (*err == EPIPE || *err == ECONNRESET) ? IoStatus::kClosed : IoStatus::kError;
  }
  return IoStatus::kOk;
}

IoStatus recvAll(int fd, void* data, size_t n, const Deadline& deadline, int* err) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    ssize_t got = ::recv(fd, p, n, 0);
    if (got > 0) {
      p += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0) return IoStatus::kClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      IoStatus s = waitFor(fd, POLLIN, deadline, err);
      if (s != IoStatus::kOk) return s;
      continue;
    }
    *err = errno;
    return errno == ECONNRESET ? IoStatus::kClosed : IoStatus::kError;
  }
  return IoStatus::kOk;
}

}  // namespace chorus::store
