// Blocking-style I/O on sockets with a deadline, shared by the store and the transport's setup:
// one status type says how a transfer ended.
#pragma once

#include "common/deadline.h"

#include <cstddef>
#include <string>

namespace chorus {

enum class IoStatus { kOk, kTimeout, kClosed, kError };

// How a transfer ended: the status, and errno when it is kError (or a reset seen as kClosed).
struct IoResult {
  IoStatus status = IoStatus::kOk;
  int err = 0;

  bool ok() const { return status == IoStatus::kOk; }
  // "timed out", "connection closed" or the errno text, for messages.
  std::string text() const;
};

// Sends/receives exactly n bytes on a blocking or non-blocking socket, polling until the
// deadline when the socket has no room or no data.
IoResult sendAll(int fd, const void* data, size_t n, const Deadline& deadline);
IoResult recvAll(int fd, void* data, size_t n, const Deadline& deadline);

void setNonBlocking(int fd);  // throws Error(kSystem)
void setNoDelay(int fd);      // best effort

}  // namespace chorus
