#include "transport/tcp/endpoint.h"

#include "common/errno_text.h"

#include <chorus/error.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace chorus::transport::tcp {

std::string formatAddress(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

namespace {

bool resolveIpv4(const std::string& host, in_addr* out) {
  if (inet_pton(AF_INET, host.c_str(), out) == 1) return true;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return false;
  *out = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return true;
}

[[noreturn]] void throwSystem(const std::string& what, int err) {
  throw Error(ErrorCode::kSystem, what + ": " + errnoText(err));
}

}  // namespace

sockaddr_in parseAddress(const std::string& hostPort) {
  auto colon = hostPort.rfind(':');
  if (colon == std::string::npos) {
    throw Error(ErrorCode::kInvalidArgument, "address '" + hostPort + "' is not host:port");
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  int port = 0;
  try {
    port = std::stoi(hostPort.substr(colon + 1));
  } catch (...) {
    port = -1;
  }
  if (port <= 0 || port > 65535 || !resolveIpv4(hostPort.substr(0, colon), &a.sin_addr)) {
    throw Error(ErrorCode::kInvalidArgument, "cannot resolve address '" + hostPort + "'");
  }
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

namespace {

// The last number in a /proc/sys file (the maximum of net.ipv4.tcp_rmem, say); 0 if unreadable.
long lastNumberIn(const char* path) {
  Fd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return 0;
  char text[128] = {};
  const ssize_t k = ::read(fd.get(), text, sizeof(text) - 1);
  if (k <= 0) return 0;
  long last = 0;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p) break;
    last = v;
    p = end;
  }
  return last;
}

// The receive buffer size the kernel's own sizing reaches by itself (this network namespace's
// settings, read once: a process does not change namespace while it runs).
struct AutoSizing {
  long receiveMax = 0;  // net.ipv4.tcp_rmem's maximum, 0 when tcp_moderate_rcvbuf is off
};

const AutoSizing& autoSizing() {
  static const AutoSizing sizes = [] {
    AutoSizing a;
    if (lastNumberIn("/proc/sys/net/ipv4/tcp_moderate_rcvbuf") != 0) {
      a.receiveMax = lastNumberIn("/proc/sys/net/ipv4/tcp_rmem");
    }
    return a;
  }();
  return sizes;
}

// 127.0.0.0/8.
bool inLoopbackNet(const in_addr& a) { return (ntohl(a.s_addr) >> 24) == 127; }

}  // namespace

bool isLoopbackPeer(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return false;
  if (a.ss_family == AF_INET) {
    return inLoopbackNet(reinterpret_cast<const sockaddr_in&>(a).sin_addr);
  }
  if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    return IN6_IS_ADDR_LOOPBACK(&v6.sin6_addr);
  }
  return false;
}

void tuneSocket(int fd, int bufferBytes, bool zeroCopy) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (bufferBytes <= 0) return;
  // Best effort: the kernel caps these at net.core.{w,r}mem_max. The send buffer is what lets
  // a send complete before the peer reads, so it is always set.
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufferBytes, sizeof(bufferBytes));
  // A receive buffer set by hand turns the kernel's sizing off for good: it then stays at that
  // size, its window fills whenever the reader is slower than the sender (a rank that shares
  // its core), and nearly every read that empties it sends a window update, which on the
  // emulated cluster costs about as much as the read (docs/performance-log.md, "CPU cost per
  // byte"). So it is set only where the kernel would not grow it that far by itself, or where
  // zero-copy sends, which are done only once the peer has taken their pages, are asked for.
  if (autoSizing().receiveMax < bufferBytes || zeroCopy) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufferBytes, sizeof(bufferBytes));
  }
}

Fd listenOn(const std::string& ip, int bufferBytes, bool zeroCopy, int* boundPort) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throwSystem("socket", errno);
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  tuneSocket(fd.get(), bufferBytes, zeroCopy);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, ip.c_str(), &a.sin_addr) != 1) {
    throw Error(ErrorCode::kInvalidArgument, "bad listen address '" + ip + "'");
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) < 0) {
    throwSystem("bind " + ip, errno);
  }
  if (::listen(fd.get(), 512) < 0) throwSystem("listen", errno);
  socklen_t len = sizeof(a);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
  *boundPort = ntohs(a.sin_port);
  return fd;
}

Fd connectTo(const sockaddr_in& addr, int bufferBytes, bool zeroCopy, Deadline deadline) {
  int delayMs = 1;
  for (;;) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) throwSystem("socket", errno);
    tuneSocket(fd.get(), bufferBytes, zeroCopy);
    int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      int n = ::poll(&p, 1, deadline.remainingMs());
      if (n == 1) {
        socklen_t len = sizeof(err);
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      } else {
        err = ETIMEDOUT;
      }
    }
    if (err == 0) return fd;
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != EAGAIN && err != ECONNRESET) {
      throwSystem("connect to " + formatAddress(addr), err);
    }
    if (deadline.expired()) {
      throw Error(ErrorCode::kTimeout,
                  "could not connect to " + formatAddress(addr) + ": " + errnoText(err));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
    delayMs = std::min(delayMs * 2, 100);
  }
}

std::string chooseListenAddress(const std::string& ifname, const std::string& routeHost) {
  if (!ifname.empty()) {
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) throwSystem("getifaddrs", errno);
    std::string found;
    for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && ifname == i->ifa_name) {
        found = formatAddress(*reinterpret_cast<sockaddr_in*>(i->ifa_addr));
        found = found.substr(0, found.rfind(':'));
        break;
      }
    }
    freeifaddrs(list);
    if (found.empty()) {
      throw Error(ErrorCode::kInvalidArgument,
                  "CHORUS_IFNAME=" + ifname + ": no such interface with an IPv4 address");
    }
    return found;
  }
  in_addr target{};
  if (routeHost.empty() || !resolveIpv4(routeHost, &target)) return "127.0.0.1";
  if (inLoopbackNet(target)) return "127.0.0.1";
  // A connected UDP socket sends nothing; it only asks the kernel which source address routes
  // there.
  Fd probe(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr = target;
  a.sin_port = htons(9);
  if (!probe || ::connect(probe.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) < 0) {
    return "127.0.0.1";
  }
  socklen_t len = sizeof(a);
  getsockname(probe.get(), reinterpret_cast<sockaddr*>(&a), &len);
  std::string s = formatAddress(a);
  return s.substr(0, s.rfind(':'));
}

}  // namespace chorus::transport::tcp
