#include "transport/tcp/endpoint.h"

#include "common/errno_text.h"

#include <chorus/error.hpp>

#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace chorus::transport::tcp {

namespace {

[[noreturn]] void throwSystem(const std::string& what, int err) {
  throw Error(ErrorCode::kSystem, what + ": " + errnoText(err));
}

}  // namespace

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

}  // namespace

bool isLoopbackPeer(int fd) { return net::peerOf(fd).loopback(); }

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
  net::SocketAddress a;
  if (!net::numericAddress(ip, 0, &a)) {
    throw Error(ErrorCode::kInvalidArgument, "bad listen address '" + ip + "'");
  }
  Fd fd(::socket(a.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throwSystem("socket", errno);
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  tuneSocket(fd.get(), bufferBytes, zeroCopy);
  if (::bind(fd.get(), a.get(), a.length) < 0) throwSystem("bind " + ip, errno);
  if (::listen(fd.get(), 512) < 0) throwSystem("listen", errno);
  *boundPort = net::localOf(fd.get()).port();
  return fd;
}

Fd connectTo(const net::SocketAddress& addr, int bufferBytes, bool zeroCopy, Deadline deadline) {
  int delayMs = 1;
  for (;;) {
    Fd fd(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) throwSystem("socket", errno);
    tuneSocket(fd.get(), bufferBytes, zeroCopy);
    int rc = ::connect(fd.get(), addr.get(), addr.length);
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
      throwSystem("connect to " + addr.text(), err);
    }
    if (deadline.expired()) {
      throw Error(ErrorCode::kTimeout,
                  "could not connect to " + addr.text() + ": " + errnoText(err));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
    delayMs = std::min(delayMs * 2, 100);
  }
}

namespace {

// The interface's IPv4 address, else its IPv6 one (a link-local one last: it needs a scope).
std::string interfaceAddress(const std::string& ifname) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throwSystem("getifaddrs", errno);
  std::string v4, v6, linkLocal;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (!i->ifa_addr || ifname != i->ifa_name) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    net::SocketAddress a;
    a.length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&a.storage, i->ifa_addr, a.length);
    if (family == AF_INET && v4.empty()) v4 = a.ip();
    if (family == AF_INET6) {
      const auto& v6addr = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr;
      std::string& slot = IN6_IS_ADDR_LINKLOCAL(&v6addr) ? linkLocal : v6;
      if (slot.empty()) slot = a.ip();
    }
  }
  freeifaddrs(list);
  if (!v4.empty()) return v4;
  if (!v6.empty()) return v6;
  throw Error(ErrorCode::kInvalidArgument,
              "CHORUS_IFNAME=" + ifname + ": no such interface with an IPv4 or global IPv6 " +
                  "address" +
                  (linkLocal.empty() ? "" : " (it has only the link-local " + linkLocal + ")"));
}

}  // namespace

std::string chooseListenAddress(const std::string& ifname, const std::string& routeHost) {
  if (!ifname.empty()) return interfaceAddress(ifname);
  net::SocketAddress target;
  if (routeHost.empty()) return "127.0.0.1";
  if (!net::numericAddress(routeHost, 9, &target)) {
    try {
      target = net::resolveAddress(net::hostPort(routeHost, 9));
    } catch (const Error&) {
      return "127.0.0.1";
    }
  }
  const char* loopback = target.family() == AF_INET6 ? "::1" : "127.0.0.1";
  if (target.loopback()) return loopback;
  // A connected UDP socket sends nothing; it only asks the kernel which source address routes
  // there.
  Fd probe(::socket(target.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!probe || ::connect(probe.get(), target.get(), target.length) < 0) return loopback;
  return net::localOf(probe.get()).ip();
}

}  // namespace chorus::transport::tcp
