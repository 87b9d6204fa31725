// Thin helpers over BSD sockets for the TCP transport.
#pragma once

#include "common/deadline.h"

#include <netinet/in.h>

#include <string>

namespace chorus::transport::tcp {

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1);
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

std::string errnoText(int err);
std::string formatAddress(const sockaddr_in& a);
// "host:port" -> address; throws Error(kInvalidArgument).
sockaddr_in parseAddress(const std::string& hostPort);

void setNonBlocking(int fd);
// TCP_NODELAY and the given send/receive buffer sizes (before connect/listen, so that the window
// scale is negotiated for them).
void tuneSocket(int fd, int bufferBytes);

// Listening socket on ip:0; *boundPort receives the port.
Fd listenOn(const std::string& ip, int bufferBytes, int* boundPort);

// Connects (blocking, retried while the peer is not listening yet) until the deadline.
Fd connectTo(const sockaddr_in& addr, int bufferBytes, Deadline deadline);

// Sends/receives exactly n bytes on a blocking or non-blocking socket before the deadline.
// Return false with *why set on timeout, EOF or error.
bool sendAll(int fd, const void* data, size_t n, Deadline deadline, std::string* why);
bool recvAll(int fd, void* data, size_t n, Deadline deadline, std::string* why);

// IPv4 address this rank should listen on: the address of `ifname` when given; otherwise the
// local address that routes to routeHost (so loopback when the store is on this host).
std::string chooseListenAddress(const std::string& ifname, const std::string& routeHost);

}  // namespace chorus::transport::tcp
