#include "common/socket_io.h"

#include "common/errno_text.h"

#include <chorus/error.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>

namespace chorus {
namespace {

// Waits for events on fd until the deadline. kOk when ready (or hung up: the next call tells).
IoResult waitFor(int fd, short events, const Deadline& deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.remainingMs());
    if (rc > 0) return {};
    if (rc == 0) {
      if (deadline.expired()) return {IoStatus::kTimeout, 0};
      continue;
    }
    if (errno == EINTR) continue;
    return {IoStatus::kError, errno};
  }
}

IoResult failed(int err) {
  return {err == EPIPE || err == ECONNRESET ? IoStatus::kClosed : IoStatus::kError, err};
}

}  // namespace

std::string IoResult::text() const {
  switch (status) {
    case IoStatus::kOk:
      return "ok";
    case IoStatus::kTimeout:
      return "timed out";
    case IoStatus::kClosed:
      return err != 0 ? "connection closed (" + errnoText(err) + ")" : "connection closed";
    case IoStatus::kError:
      break;
  }
  return errnoText(err);
}

IoResult sendAll(int fd, const void* data, size_t n, const Deadline& deadline) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t sent = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      p += sent;
      n -= static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      IoResult r = waitFor(fd, POLLOUT, deadline);
      if (!r.ok()) return r;
      continue;
    }
    return failed(sent < 0 ? errno : EPIPE);
  }
  return {};
}

IoResult recvAll(int fd, void* data, size_t n, const Deadline& deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    ssize_t got = ::recv(fd, p, n, MSG_DONTWAIT);
    if (got > 0) {
      p += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0) return {IoStatus::kClosed, 0};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      IoResult r = waitFor(fd, POLLIN, deadline);
      if (!r.ok()) return r;
      continue;
    }
    return failed(errno);
  }
  return {};
}

void setNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw Error(ErrorCode::kSystem, "fcntl(O_NONBLOCK): " + errnoText(errno));
  }
}

void setNoDelay(int fd) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace chorus
