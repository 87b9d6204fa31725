// The first line a child process writes to a pipe (a tool's "listening on ..." line), read byte
// by byte so nothing after it is consumed; closes the pipe's read end.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <string>

namespace chorus::testing {

// Up to and including the newline; what came before EOF or before `timeoutMs` passed with
// nothing to read.
inline std::string readFirstLine(int fd, int timeoutMs = 5000) {
  std::string line;
  char c = 0;
  pollfd p{fd, POLLIN, 0};
  while (line.find('\n') == std::string::npos && ::poll(&p, 1, timeoutMs) > 0 &&
         ::read(fd, &c, 1) == 1) {
    line += c;
  }
  ::close(fd);
  return line;
}

}  // namespace chorus::testing
