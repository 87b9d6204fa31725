// Endpoints of the TCP links, IPv4 and IPv6: the listening socket, connecting to a peer, and
// the address a rank listens on. Addresses and their text: common/net_address.h.
#pragma once

#include "common/deadline.h"
#include "common/fd.h"
#include "common/net_address.h"

#include <string>

namespace chorus::transport::tcp {

// TCP_NODELAY, and send/receive buffers of at least bufferBytes (before connect/listen, so that
// the window scale is negotiated for them): the receive buffer is left to the kernel's own
// sizing where that reaches bufferBytes (net.ipv4.tcp_rmem maximum, tcp_moderate_rcvbuf) and
// zero-copy sends (Options::tcp.zeroCopyBytes) are off.
void tuneSocket(int fd, int bufferBytes, bool zeroCopy);

// Whether the socket's peer is a loopback address (127.0.0.0/8, ::1): a connection that never
// leaves the machine's own stack.
bool isLoopbackPeer(int fd);

// Listening socket on ip:0 (an IPv4 or IPv6 literal); *boundPort receives the port.
Fd listenOn(const std::string& ip, int bufferBytes, bool zeroCopy, int* boundPort);

// Connects (blocking, retried while the peer is not listening yet) until the deadline.
Fd connectTo(const net::SocketAddress& addr, int bufferBytes, bool zeroCopy, Deadline deadline);

// Address this rank should listen on: the address of `ifname` when given (its IPv4 one, else
// its IPv6 one); otherwise the local address that routes to routeHost, of routeHost's family
// (so 127.0.0.1 or ::1 when the store is on this host's loopback).
std::string chooseListenAddress(const std::string& ifname, const std::string& routeHost);

}  // namespace chorus::transport::tcp
