// TCP store server: one thread running a poll() loop over non-blocking sockets
// (protocol: tcp_store_protocol.h).
//
// Requests from one client are handled in order. A GET or WAIT whose keys are missing parks the
// client: it is registered under one missing key and re-examined when that key is set, and
// answered with a kTimeout status once the request's timeout passes. While parked, nothing more
// is read from the client, but a hang-up (POLLRDHUP) still closes it and drops the registration. A
// malformed frame closes only the client that sent it. The destructor wakes the loop through an
// eventfd, joins the thread and closes every connection.
//
// With a job key (CHORUS_AUTH_KEY_FILE), a connection must first complete the authentication
// handshake (auth/server_handshake.h, context "store") within the handshake deadline; until then
// nothing it sends is read as a request. Refusals are logged once per address and close only that
// connection. The limits of tcp_store_limits.h (key and value sizes, connections, the handshake
// deadline and the time one frame may take to arrive) apply to every client. Without a key, a
// new connection must send its first whole request within the frame deadline (the counterpart
// of the handshake deadline): a client that connects and stays silent is dropped. After that only
// frames begun and not finished are timed, so a request parked for a long time is never cut, and
// an idle pooled connection that was dropped is replaced by the client (tcp_store_client.cc).
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include "auth/refusal_log.h"
#include "auth/server_handshake.h"
#include "auth/settings.h"
#include "common/errno_text.h"
#include "common/fd.h"
#include "common/net_address.h"
#include "common/socket_io.h"
#include "store/store_util.h"
#include "store/tcp_store_limits.h"
#include "store/tcp_store_protocol.h"
#include "store/tcp_store_server_impl.h"

namespace chorus {

using namespace store::server;

TcpStoreServer::TcpStoreServer(const std::string& host, int port)
    : TcpStoreServer(host, port, AuthOptions::fromEnv(), StoreLimits::fromEnv()) {}

TcpStoreServer::TcpStoreServer(const std::string& host, int port, const AuthOptions& auth,
                               const StoreLimits& limits)
    : impl_(std::make_unique<Impl>()) {
  const std::string addr = net::hostPort(host, port);
  impl_->auth = auth::authSettingsFrom(auth);
  impl_->auth.requireKeyIfAsked("TcpStoreServer " + addr);
  impl_->limits = limits;
  if (port < 0 || port > 65535) {
    throw Error(ErrorCode::kInvalidArgument, "TcpStoreServer: bad port in " + addr);
  }
  std::string error;
  bool transient = false;
  net::AddrInfoPtr addrs = net::resolveTcp(host, port, true, &error, &transient);
  if (!addrs) {
    throw Error(ErrorCode::kSystem, "TcpStoreServer: cannot resolve " + addr + ": " + error);
  }
  for (addrinfo* ai = addrs.get(); ai != nullptr && !impl_->listen_fd.valid(); ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      error = "socket: " + errnoText(errno);
      continue;
    }
    int one = 1;
    (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      error = "bind: " + errnoText(errno);
      continue;
    }
    if (::listen(fd.get(), SOMAXCONN) != 0) {
      error = "listen: " + errnoText(errno);
      continue;
    }
    impl_->listen_fd = std::move(fd);
  }
  if (!impl_->listen_fd.valid()) {
    throw Error(ErrorCode::kSystem, "TcpStoreServer: cannot listen on " + addr + ": " + error);
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (::getsockname(impl_->listen_fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    store::throwSystem("TcpStoreServer: getsockname", errno);
  }
  impl_->port = bound.ss_family == AF_INET6
                    ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                    : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  impl_->wake_fd = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!impl_->wake_fd.valid()) store::throwSystem("TcpStoreServer: eventfd", errno);
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

TcpStoreServer::~TcpStoreServer() {
  impl_->stop.store(true);
  uint64_t one = 1;
  ssize_t n = ::write(impl_->wake_fd.get(), &one, sizeof(one));
  (void)n;
  if (impl_->thread.joinable()) impl_->thread.join();
  // Impl's destructor closes the client sockets, so clients see the server go away.
}

int TcpStoreServer::port() const { return impl_->port; }

void TcpStoreServer::Impl::run() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  int timeout_ms = -1;
  while (!stop.load()) {
    fds.clear();
    ids.clear();
    fds.push_back({wake_fd.get(), POLLIN, 0});
    fds.push_back({listen_fd.get(), POLLIN, 0});
    for (auto& [id, c] : clients) {
      short events = c.blocked() ? POLLRDHUP : POLLIN;
      if (c.outPending() > 0) events |= POLLOUT;
      fds.push_back({c.fd.get(), events, 0});
      ids.push_back(id);
    }
    int rc = ::poll(fds.data(), fds.size(), timeout_ms);
    if (rc < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "chorus: TcpStoreServer: poll: %s\n", errnoText(errno).c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (stop.load()) break;
    if (fds[1].revents & POLLIN) acceptAll();
    for (size_t i = 0; i < ids.size(); ++i) {
      short rev = fds[i + 2].revents;
      if (rev == 0) continue;
      auto it = clients.find(ids[i]);
      if (it == clients.end() || it->second.dead) continue;
      Client& c = it->second;
      if (rev & (POLLERR | POLLNVAL)) {
        c.dead = true;
      } else if (c.blocked() && (rev & (POLLRDHUP | POLLHUP))) {
        c.dead = true;  // gave up waiting (its deadline passed, or it exited)
      } else {
        if (rev & POLLOUT) {
          bool was_blocked = c.blocked();
          flush(c);
          if (was_blocked && !c.blocked()) runnable.push_back(ids[i]);
        }
        if (!c.dead && (rev & (POLLIN | POLLHUP))) readFrom(ids[i], c);
      }
    }
    expireParked();
    // Clients whose parked request was answered or whose replies drained: handle what they sent.
    while (!runnable.empty()) {
      std::vector<uint64_t> batch;
      batch.swap(runnable);
      for (uint64_t id : batch) {
        auto it = clients.find(id);
        if (it != clients.end() && !it->second.dead) handleInput(id, it->second);
      }
    }
    for (auto it = clients.begin(); it != clients.end();) {
      uint64_t id = it->first;
      ++it;
      if (clients.at(id).dead) close(id);
    }
    timeout_ms = expireParked();
    const int slow_ms = dropSlowClients();
    if (timeout_ms < 0 || (slow_ms >= 0 && slow_ms < timeout_ms)) timeout_ms = slow_ms;
    if (!runnable.empty()) timeout_ms = 0;
  }
}

void TcpStoreServer::Impl::acceptAll() {
  while (true) {
    int fd = ::accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        // Out of descriptors or memory: leave the connection queued and retry shortly.
        std::fprintf(stderr, "chorus: TcpStoreServer: accept: %s\n", errnoText(errno).c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return;
    }
    setNoDelay(fd);
    Client c;
    c.fd = Fd(fd);
    c.address = net::peerOf(fd).text();
    if (clients.size() >= limits.maxConnections) {
      auth::logRefusal("store connection refused", c.address,
                       std::to_string(clients.size()) +
                           " connections open, the limit (CHORUS_STORE_MAX_CONNECTIONS)");
      continue;  // closes it
    }
    if (auth.key) {
      c.handshake = std::make_unique<auth::ServerHandshake>(*auth.key, kStoreContext);
      c.handshake_until = Clock::now() + auth.handshakeTime;
    } else {
      c.first_request_until = Clock::now() + limits.frameTimeout;
    }
    clients.emplace(next_id++, std::move(c));
  }
}

void TcpStoreServer::Impl::readFrom(uint64_t id, Client& c) {
  size_t total = 0;
  while (!c.dead && !c.blocked() && total < kReadPerWakeup) {
    size_t old = c.in.size();
    c.in.resize(old + kReadChunk);
    ssize_t n = ::recv(c.fd.get(), c.in.data() + old, kReadChunk, 0);
    int err = errno;
    c.in.resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n == 0) {
      c.dead = true;  // the client hung up
      return;
    }
    if (n < 0) {
      if (err == EINTR) continue;
      if (err != EAGAIN && err != EWOULDBLOCK) c.dead = true;
      return;
    }
    total += static_cast<size_t>(n);
    handleInput(id, c);
  }
}

bool TcpStoreServer::Impl::authenticate(Client& c) {
  if (!c.handshake) return true;
  if (!c.handshake_begun) {
    // The first four bytes tell a handshake from a client without a key, whose request is kept
    // whole so that it can be answered.
    const size_t avail = c.in.size() - c.in_pos;
    if (avail < 4) return false;
    if (!auth::startsHandshake(c.in.data() + c.in_pos, avail)) {
      auth::logRefusal("authentication failed", c.address,
                       "no key (the client sent no authentication handshake)");
      c.handshake.reset();
      if (proto::loadLE(c.in.data() + c.in_pos, 4) == proto::kMagic) {
        c.unauthenticated_request = true;
        return true;
      }
      c.dead = true;
      return false;
    }
    c.handshake_begun = true;
  }
  c.in_pos += c.handshake->take(c.in.data() + c.in_pos, c.in.size() - c.in_pos);
  auto& out = c.handshake->output();
  if (!out.empty()) {
    reply(c, std::move(out));
    out.clear();
  }
  switch (c.handshake->state()) {
    case auth::ServerHandshake::State::kRunning:
      return false;
    case auth::ServerHandshake::State::kAccepted:
      c.handshake.reset();
      c.handshake_until = kNever;
      return true;
    case auth::ServerHandshake::State::kRefused:
      auth::logRefusal("authentication failed", c.address, c.handshake->failure());
      c.dead = true;
      return false;
  }
  return false;
}

void TcpStoreServer::Impl::refuse(Client& c, const std::string& what, const std::string& why) {
  auth::logRefusal(what, c.address, why);
  replyError(c, ErrorCode::kInvalidArgument, why);
}

int TcpStoreServer::Impl::dropSlowClients() {
  const auto now = Clock::now();
  auto next = kNever;
  for (auto& [id, c] : clients) {
    if (c.dead) continue;
    const bool handshaking = c.handshake != nullptr || c.unauthenticated_request;
    const auto frameUntil =
        c.partial_since == kNever || c.blocked() ? kNever : c.partial_since + limits.frameTimeout;
    const bool silent = !handshaking && c.first_request_until < frameUntil;
    const auto until = handshaking ? c.handshake_until
                       : silent    ? c.first_request_until
                                   : frameUntil;
    if (until == kNever) continue;
    if (until <= now) {
      auth::logRefusal(handshaking ? "authentication failed" : "store connection dropped",
                       c.address,
                       handshaking ? "handshake timed out (CHORUS_HANDSHAKE_TIMEOUT)"
                       : silent    ? "no request within the frame deadline after connecting "
                                     "(CHORUS_STORE_FRAME_TIMEOUT)"
                                   : "a request took too long to arrive "
                                     "(CHORUS_STORE_FRAME_TIMEOUT)");
      c.dead = true;
    } else {
      next = std::min(next, until);
    }
  }
  for (auto it = clients.begin(); it != clients.end();) {
    uint64_t id = it->first;
    ++it;
    if (clients.at(id).dead) close(id);
  }
  if (next == kNever) return -1;
  return Deadline(next).remainingMs(60 * 1000) + 1;
}

void TcpStoreServer::Impl::unregister(uint64_t id, Client& c) {
  if (!c.parked_on.empty()) {
    auto wit = waiters.find(c.parked_on);
    if (wit != waiters.end()) {
      wit->second.erase(id);
      if (wit->second.empty()) waiters.erase(wit);
    }
  }
  c.parked = false;
  c.parked_on.clear();
  c.parked_keys.clear();
}

void TcpStoreServer::Impl::reply(Client& c, std::vector<uint8_t> frame) {
  if (c.out_pos == c.out.size()) {
    c.out.clear();
    c.out_pos = 0;
  }
  if (c.out.empty()) {
    c.out = std::move(frame);
  } else {
    c.out.insert(c.out.end(), frame.begin(), frame.end());
  }
  flush(c);
}

void TcpStoreServer::Impl::replyError(Client& c, ErrorCode code, const std::string& message) {
  reply(c, proto::Writer(static_cast<uint8_t>(code)).str(message).finish());
}

void TcpStoreServer::Impl::flush(Client& c) {
  while (c.outPending() > 0) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_pos, c.outPending(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out_pos += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    c.dead = true;
    return;
  }
  if (c.out_pos == c.out.size()) {
    c.out.clear();
    c.out_pos = 0;
  }
}

void TcpStoreServer::Impl::close(uint64_t id) {
  auto it = clients.find(id);
  if (it == clients.end()) return;
  unregister(id, it->second);
  clients.erase(it);  // closes the socket
}

}  // namespace chorus
