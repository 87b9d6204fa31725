// IPv4 endpoints of the TCP links: addresses, the listening socket, connecting to a peer.
#pragma once

#include "common/deadline.h"
#include "common/fd.h"

#include <netinet/in.h>

#include <string>

namespace chorus::transport::tcp {

std::string formatAddress(const sockaddr_in& a);
// "host:port" -> address; throws Error(kInvalidArgument).
sockaddr_in parseAddress(const std::string& hostPort);

// TCP_NODELAY, and send/receive buffers of at least bufferBytes (before connect/listen, so that
// the window scale is negotiated for them): the receive buffer is left to the kernel's own
// sizing where that reaches bufferBytes (net.ipv4.tcp_rmem maximum, tcp_moderate_rcvbuf) and
// zero-copy sends (Options::tcp.zeroCopyBytes) are off.
void tuneSocket(int fd, int bufferBytes, bool zeroCopy);

// Whether the socket's peer is a loopback address (127.0.0.0/8, ::1): a connection that never
// leaves the machine's own stack.
bool isLoopbackPeer(int fd);

// Listening socket on ip:0; *boundPort receives the port.
Fd listenOn(const std::string& ip, int bufferBytes, bool zeroCopy, int* boundPort);

// Connects (blocking, retried while the peer is not listening yet) until the deadline.
Fd connectTo(const sockaddr_in& addr, int bufferBytes, bool zeroCopy, Deadline deadline);

// IPv4 address this rank should listen on: the address of `ifname` when given; otherwise the
// local address that routes to routeHost (so loopback when the store is on this host).
std::string chooseListenAddress(const std::string& ifname, const std::string& routeHost);

}  // namespace chorus::transport::tcp
