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
#include "common/socket_io.h"
#include "store/store_util.h"
#include "store/tcp_address.h"
#include "store/tcp_store_limits.h"
#include "store/tcp_store_protocol.h"

namespace chorus {

namespace proto = store::proto;

namespace {

constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kReadPerWakeup = 1 << 20;  // fairness between clients

// What a client proves with its handshake: knowledge of the key for this store.
const std::vector<uint8_t> kStoreContext = {'s', 't', 'o', 'r', 'e'};

constexpr auto kNever = Clock::time_point::max();
// A client without a key gets an error frame naming the problem, if its request is this small.
constexpr uint32_t kLargestAnsweredStranger = 64 * 1024;

struct Client {
  Fd fd;
  std::string address;  // the peer's ip:port, for messages
  // Until the client has proved the key (null without a key, or once proved).
  std::unique_ptr<auth::ServerHandshake> handshake;
  Clock::time_point handshake_until = kNever;
  bool handshake_begun = false;  // its first bytes were a handshake's
  // A client without a key that speaks the store protocol: answered with an error, then closed.
  bool unauthenticated_request = false;
  // Without a key: until when its first whole request must have arrived (kNever: it has).
  Clock::time_point first_request_until = kNever;
  // Since when part of a frame has been waiting for the rest (kNever: none).
  Clock::time_point partial_since = kNever;
  std::vector<uint8_t> in;  // received, not yet handled: [in_pos, in.size())
  size_t in_pos = 0;
  std::vector<uint8_t> out;  // to send: [out_pos, out.size())
  size_t out_pos = 0;
  bool dead = false;
  // A parked GET/WAIT: its keys, and the missing key it is registered under.
  bool parked = false;
  proto::Op parked_op = proto::Op::kGet;
  std::vector<std::string> parked_keys;
  std::string parked_on;
  Clock::time_point parked_until = Clock::time_point::max();

  size_t outPending() const { return out.size() - out_pos; }
  // Stops handling (and reading) requests while parked or while replies pile up unread.
  bool blocked() const { return parked || outPending() > proto::kMaxBody; }
};

}  // namespace

struct TcpStoreServer::Impl {
  auth::AuthSettings auth;
  store::ServerLimits limits;
  Fd listen_fd;
  Fd wake_fd;
  int port = 0;
  std::atomic<bool> stop{false};
  std::thread thread;

  // Owned by the server thread.
  std::unordered_map<uint64_t, Client> clients;
  uint64_t next_id = 1;
  std::unordered_map<std::string, Store::Bytes> data;
  std::unordered_map<std::string, std::unordered_set<uint64_t>> waiters;  // key -> parked ids
  std::vector<uint64_t> runnable;  // clients unparked or drained: handle their buffered input

  void run();
  void acceptAll();
  void readFrom(uint64_t id, Client& c);
  void handleInput(uint64_t id, Client& c);
  void handleRequest(uint64_t id, Client& c, proto::Op op, proto::Reader& r);
  bool tryAnswerParked(uint64_t id, Client& c);
  void notify(const std::string& key);
  int expireParked();     // answers timed-out parked requests; returns the poll timeout in ms
  int dropSlowClients();  // past their handshake or frame deadline; returns the poll timeout
  bool authenticate(Client& c);  // feeds the handshake; false while it is not done
  void refuse(Client& c, const std::string& what, const std::string& why);
  bool checkKey(Client& c, const std::string& key);  // false (after replying) when too long
  void unregister(uint64_t id, Client& c);
  void reply(Client& c, std::vector<uint8_t> frame);
  void replyError(Client& c, ErrorCode code, const std::string& message);
  void flush(Client& c);
  void close(uint64_t id);
};

TcpStoreServer::TcpStoreServer(const std::string& host, int port)
    : impl_(std::make_unique<Impl>()) {
  const std::string addr = store::hostPort(host, port);
  impl_->auth = auth::authSettingsFromEnv();
  impl_->auth.requireKeyIfAsked("TcpStoreServer " + addr);
  impl_->limits = store::ServerLimits::fromEnv();
  if (port < 0 || port > 65535) {
    throw Error(ErrorCode::kInvalidArgument, "TcpStoreServer: bad port in " + addr);
  }
  std::string error;
  bool transient = false;
  store::AddrInfoPtr addrs = store::resolveTcp(host, port, true, &error, &transient);
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
    c.address = store::peerAddressOf(fd);
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
      c.first_request_until = Clock::now() + limits.frameTime;
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

bool TcpStoreServer::Impl::checkKey(Client& c, const std::string& key) {
  if (key.size() <= limits.maxKeyBytes) return true;
  refuse(c, "store request refused",
         "key of " + std::to_string(key.size()) + " bytes, longer than this store's limit of " +
             std::to_string(limits.maxKeyBytes) + " (CHORUS_STORE_MAX_KEY)");
  return false;
}

void TcpStoreServer::Impl::handleInput(uint64_t id, Client& c) {
  if (!authenticate(c)) return;
  bool progressed = false;
  while (!c.dead && !c.blocked()) {
    size_t avail = c.in.size() - c.in_pos;
    if (avail < proto::kHeaderSize) break;
    proto::Header h = proto::parseHeader(c.in.data() + c.in_pos);
    if (!proto::plausible(h) || !proto::validOp(h.code)) {
      c.dead = true;  // garbage, a foreign protocol, or an oversized length
      return;
    }
    if (c.unauthenticated_request) {
      if (h.body_len > kLargestAnsweredStranger) {
        c.dead = true;
        return;
      }
      if (avail < proto::kHeaderSize + h.body_len) break;
      c.in_pos = c.in.size();
      replyError(c, ErrorCode::kInvalidArgument,
                 "this store requires authentication: give the client the job's key file "
                 "(CHORUS_AUTH_KEY_FILE)");
      c.dead = true;
      return;
    }
    // The largest request a client may send: a SET of the longest key and value.
    const uint64_t largest = uint64_t{limits.maxKeyBytes} + limits.maxValueBytes + 8;
    if (h.body_len > largest) {
      refuse(c, "store request refused",
             "request of " + std::to_string(h.body_len) + " bytes, more than this store takes (" +
                 "CHORUS_STORE_MAX_KEY=" + std::to_string(limits.maxKeyBytes) +
                 ", CHORUS_STORE_MAX_VALUE=" + std::to_string(limits.maxValueBytes) + ")");
      c.dead = true;  // its body is not worth reading
      return;
    }
    if (avail < proto::kHeaderSize + h.body_len) break;
    proto::Reader r(c.in.data() + c.in_pos + proto::kHeaderSize, h.body_len);
    c.in_pos += proto::kHeaderSize + h.body_len;
    progressed = true;
    c.first_request_until = kNever;
    try {
      handleRequest(id, c, static_cast<proto::Op>(h.code), r);
    } catch (const std::exception& e) {
      // bad_alloc and the like: drop this client, keep serving the others.
      std::fprintf(stderr, "chorus: TcpStoreServer: dropping a client: %s\n", e.what());
      c.dead = true;
    }
  }
  // A frame begun and not finished must be finished within the frame deadline; parked clients
  // are not read from, so their clock stops.
  if (c.blocked() || c.in_pos == c.in.size()) {
    c.partial_since = kNever;
  } else if (progressed || c.partial_since == kNever) {
    c.partial_since = Clock::now();
  }
  // Drop handled bytes once they dominate the buffer.
  if (c.in_pos > 0 && (c.in_pos == c.in.size() || c.in_pos >= c.in.size() / 2)) {
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(c.in_pos));
    c.in_pos = 0;
  }
}

void TcpStoreServer::Impl::handleRequest(uint64_t id, Client& c, proto::Op op, proto::Reader& r) {
  switch (op) {
    case proto::Op::kSet: {
      std::string key = r.str();
      Store::Bytes value = r.bytes();
      if (!r.done()) break;
      if (!checkKey(c, key)) return;
      if (value.size() > limits.maxValueBytes) {
        refuse(c, "store request refused",
               "value of " + std::to_string(value.size()) + " bytes for key " +
                   store::quoteKey(key) + ", larger than this store's limit of " +
                   std::to_string(limits.maxValueBytes) + " (CHORUS_STORE_MAX_VALUE)");
        return;
      }
      data[key] = std::move(value);
      reply(c, proto::Writer(0).finish());
      notify(key);
      return;
    }
    case proto::Op::kAdd: {
      std::string key = r.str();
      int64_t delta = r.i64();
      if (!r.done()) break;
      if (!checkKey(c, key)) return;
      int64_t result = 0;
      try {
        auto it = data.find(key);
        result = store::addCounter(key, it == data.end() ? 0 : store::parseCounter(key, it->second),
                                   delta);
      } catch (const Error& e) {
        replyError(c, e.code(), e.what());
        return;
      }
      data[key] = store::formatCounter(result);
      reply(c, proto::Writer(0).i64(result).finish());
      notify(key);
      return;
    }
    case proto::Op::kGet:
    case proto::Op::kCheck:
    case proto::Op::kWait: {
      std::vector<std::string> keys;
      int64_t timeout = op == proto::Op::kCheck ? 0 : r.i64();
      if (op == proto::Op::kGet) {
        keys.push_back(r.str());
      } else {
        uint32_t n = r.u32();
        // Each key takes at least 4 bytes: bounds n before reserving.
        if (r.failed() || n > r.left() / 4) break;
        keys.reserve(n);
        for (uint32_t i = 0; i < n; ++i) keys.push_back(r.str());
      }
      if (!r.done()) break;
      for (const auto& k : keys) {
        if (!checkKey(c, k)) return;
      }
      if (op == proto::Op::kCheck) {
        bool all = true;
        for (const auto& k : keys) all = all && data.count(k) != 0;
        reply(c, proto::Writer(0).u8(all ? 1 : 0).finish());
        return;
      }
      c.parked = true;
      c.parked_op = op;
      c.parked_keys = std::move(keys);
      c.parked_until = store::deadlineAfter(std::chrono::milliseconds(timeout)).at();
      if (!tryAnswerParked(id, c) && Clock::now() >= c.parked_until) {
        std::string missing = c.parked_on;
        unregister(id, c);  // a zero timeout: answer at once
        replyError(c, ErrorCode::kTimeout, missing);
      }
      return;
    }
  }
  c.dead = true;  // the body did not parse
}

// Answers the parked request if its keys are all present; otherwise (re)registers it under a
// missing key. Returns true when answered.
bool TcpStoreServer::Impl::tryAnswerParked(uint64_t id, Client& c) {
  for (const auto& k : c.parked_keys) {
    if (data.count(k) == 0) {
      c.parked_on = k;
      waiters[k].insert(id);
      return false;
    }
  }
  c.parked = false;
  c.parked_on.clear();
  if (c.parked_op == proto::Op::kGet) {
    reply(c, proto::Writer(0).bytes(data.at(c.parked_keys[0])).finish());
  } else {
    reply(c, proto::Writer(0).finish());
  }
  c.parked_keys.clear();
  return true;
}

int TcpStoreServer::Impl::expireParked() {
  auto now = Clock::now();
  auto next = Clock::time_point::max();
  for (auto& [id, c] : clients) {
    if (!c.parked || c.dead) continue;
    if (c.parked_until <= now) {
      std::string missing = c.parked_on;
      unregister(id, c);
      replyError(c, ErrorCode::kTimeout, missing);
      runnable.push_back(id);
    } else {
      next = std::min(next, c.parked_until);
    }
  }
  if (next == Clock::time_point::max()) return -1;
  return Deadline(next).remainingMs(60 * 1000);
}

int TcpStoreServer::Impl::dropSlowClients() {
  const auto now = Clock::now();
  auto next = kNever;
  for (auto& [id, c] : clients) {
    if (c.dead) continue;
    const bool handshaking = c.handshake != nullptr || c.unauthenticated_request;
    const auto frameUntil =
        c.partial_since == kNever || c.blocked() ? kNever : c.partial_since + limits.frameTime;
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

void TcpStoreServer::Impl::notify(const std::string& key) {
  auto it = waiters.find(key);
  if (it == waiters.end()) return;
  std::unordered_set<uint64_t> ids = std::move(it->second);
  waiters.erase(it);
  for (uint64_t id : ids) {
    auto cit = clients.find(id);
    if (cit == clients.end()) continue;
    Client& c = cit->second;
    if (c.dead || !c.parked || c.parked_on != key) continue;
    if (tryAnswerParked(id, c)) runnable.push_back(id);
  }
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
