// Client of the TCP store server (protocol: tcp_store_protocol.h).
//
// Each call takes an idle connection from a small pool (opening a new one when every connection
// is busy), so a thread blocked in get()/wait() does not hold up other threads sharing the store.
// Connections are non-blocking sockets driven by poll() against the call's deadline. Connecting
// retries until the timeout, since the server may start after the client. A call that times out
// drops its connection (the server then forgets the parked request); a connection lost mid-call
// raises kPeerFailure. With a job key (AuthOptions::keyFile), every new connection first proves
// the key to the server and checks the server's proof (auth/client_handshake.h, context "store");
// a refused key is an error that says so, never retried.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>

#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include "auth/client_handshake.h"
#include "auth/settings.h"
#include "common/errno_text.h"
#include "common/fd.h"
#include "common/net_address.h"
#include "common/socket_io.h"
#include "store/store_util.h"
#include "store/tcp_store_protocol.h"

namespace chorus {
namespace {

namespace proto = store::proto;

constexpr size_t kMaxIdleConnections = 4;
constexpr size_t kMaxMessageShown = 1000;
constexpr size_t kBodyChunk = 1 << 20;
// What the handshake proves: knowledge of the key for the store (tcp_store_server.cc's).
const std::vector<uint8_t> kStoreContext = {'s', 't', 'o', 'r', 'e'};

// A server's error text as it may appear in an Error: control and non-ASCII bytes as \xNN, long
// text cut short.
std::string printable(std::string_view text) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMaxMessageShown; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (text.size() > kMaxMessageShown) out += "...";
  return out;
}

class TcpStore final : public Store {
 public:
  TcpStore(std::string host, int port, std::chrono::milliseconds timeout, const AuthOptions& auth)
      : host_(std::move(host)),
        port_(port),
        timeout_(timeout),
        addr_(net::hostPort(host_, port_)),
        where_("TCP store " + addr_),
        auth_(auth::authSettingsFrom(auth)) {
    auth_.requireKeyIfAsked("connecting to the " + where_);
    if (port_ <= 0 || port_ > 65535) {
      throw Error(ErrorCode::kInvalidArgument,
                  "tcp store: bad port " + std::to_string(port_) + " for host '" + host_ + "'");
    }
    // Connect eagerly so that an unreachable server is reported at construction.
    idle_.push_back(connect(Deadline::after(timeout_), timeout_));
  }

  void set(const std::string& key, const Bytes& value) override {
    if (value.size() > proto::kMaxBody) {
      throw Error(ErrorCode::kInvalidArgument,
                  "tcp store: value of key " + store::quoteKey(key) + " is too large (" +
                      std::to_string(value.size()) + " bytes, limit 64 MiB)");
    }
    proto::Writer w(static_cast<uint8_t>(proto::Op::kSet));
    w.str(key).bytes(value);
    call(std::move(w), Deadline::after(timeout_), "set of key " + store::quoteKey(key), timeout_);
  }

  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    proto::Writer w(static_cast<uint8_t>(proto::Op::kGet));
    w.i64(timeout.count()).str(key);
    Bytes body = call(std::move(w), waitDeadline(timeout), "key " + store::quoteKey(key), timeout);
    proto::Reader r(body.data(), body.size());
    Bytes value = r.bytes();
    if (!r.done()) badResponse();
    return value;
  }

  int64_t add(const std::string& key, int64_t delta) override {
    proto::Writer w(static_cast<uint8_t>(proto::Op::kAdd));
    w.str(key).i64(delta);
    Bytes body = call(std::move(w), Deadline::after(timeout_), "add on key " + store::quoteKey(key),
                      timeout_);
    proto::Reader r(body.data(), body.size());
    int64_t value = r.i64();
    if (!r.done()) badResponse();
    return value;
  }

  bool check(const std::vector<std::string>& keys) override {
    proto::Writer w(static_cast<uint8_t>(proto::Op::kCheck));
    putKeys(w, keys);
    Bytes body = call(std::move(w), Deadline::after(timeout_),
                      "check of " + std::to_string(keys.size()) + " keys", timeout_);
    proto::Reader r(body.data(), body.size());
    uint8_t all = r.u8();
    if (!r.done() || all > 1) badResponse();
    return all == 1;
  }

  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::string what = keys.size() == 1 ? "key " + store::quoteKey(keys[0])
                                        : std::to_string(keys.size()) + " keys";
    proto::Writer w(static_cast<uint8_t>(proto::Op::kWait));
    w.i64(timeout.count());
    putKeys(w, keys);
    Bytes body = call(std::move(w), waitDeadline(timeout), what, timeout);
    if (!body.empty()) badResponse();
  }

  std::vector<Bytes> getMany(const std::vector<std::string>& keys,
                             std::chrono::milliseconds timeout) override {
    if (keys.size() == 1 || !readsMany_.load(std::memory_order_relaxed)) {
      return getEach(keys, timeout);
    }
    proto::Writer w(static_cast<uint8_t>(proto::Op::kMultiGet));
    w.i64(timeout.count());
    putKeys(w, keys);
    const Deadline deadline = waitDeadline(timeout);
    Bytes body;
    try {
      body = call(std::move(w), deadline, std::to_string(keys.size()) + " keys", timeout);
    } catch (const Error& e) {
      // A server older than MGET closes the connection on it: read the keys one by one, now and
      // from then on (a lost connection fails again there, with its own message).
      if (e.code() != ErrorCode::kPeerFailure) throw;
      readsMany_.store(false, std::memory_order_relaxed);
      return getEach(keys, timeout);
    }
    proto::Reader r(body.data(), body.size());
    const uint32_t n = r.u32();
    if (r.failed() || n != keys.size()) badResponse();
    std::vector<Bytes> values;
    values.reserve(n);
    for (uint32_t i = 0; i < n; ++i) values.push_back(r.bytes());
    if (!r.done()) badResponse();
    return values;
  }

 private:
  std::vector<Bytes> getEach(const std::vector<std::string>& keys,
                             std::chrono::milliseconds timeout) {
    const Deadline deadline = Deadline::after(timeout);
    std::vector<Bytes> values;
    values.reserve(keys.size());
    for (const auto& k : keys) {
      values.push_back(get(k, std::chrono::milliseconds(deadline.remainingMs())));
    }
    return values;
  }

  static void putKeys(proto::Writer& w, const std::vector<std::string>& keys) {
    w.u32(static_cast<uint32_t>(keys.size()));
    for (const auto& k : keys) w.str(k);
  }

  // The server answers a parked GET/WAIT with kTimeout when `timeout` passes; the client gives it
  // its I/O timeout on top of that before giving up on the connection.
  Deadline waitDeadline(std::chrono::milliseconds timeout) const {
    if (timeout > std::chrono::milliseconds::max() - timeout_) return Deadline::never();
    return Deadline::after(std::max(timeout, std::chrono::milliseconds(0)) + timeout_);
  }

  [[noreturn]] void badResponse() const {
    throw Error(ErrorCode::kPeerFailure, "tcp store: malformed response from server " + addr_);
  }

  // Sends one request and returns the body of its OK response.
  Bytes call(proto::Writer&& request, const Deadline& deadline, const std::string& what,
             std::chrono::milliseconds timeout) {
    if (request.bodySize() > proto::kMaxBody) {
      throw Error(ErrorCode::kInvalidArgument, "tcp store: request too large for " + what + " (" +
                                                   std::to_string(request.bodySize()) +
                                                   " bytes, limit 64 MiB)");
    }
    std::vector<uint8_t> frame = request.finish();
    Fd conn = acquire(deadline, timeout);
    IoResult io = sendAll(conn.get(), frame.data(), frame.size(), deadline);
    if (!io.ok()) fail(io, what, timeout);

    uint8_t header[proto::kHeaderSize];
    io = recvAll(conn.get(), header, sizeof(header), deadline);
    if (!io.ok()) fail(io, what, timeout);
    proto::Header h = proto::parseHeader(header);
    if (!proto::plausible(h)) badResponse();
    // Grown as the bytes arrive: a header that claims 64 MiB and sends nothing costs nothing.
    Bytes body;
    while (body.size() < h.body_len) {
      const size_t have = body.size();
      const size_t chunk = std::min<size_t>(kBodyChunk, h.body_len - have);
      body.resize(have + chunk);
      io = recvAll(conn.get(), body.data() + have, chunk, deadline);
      if (!io.ok()) fail(io, what, timeout);
    }
    // After an error the server may close the connection (a request over its limits): only a
    // connection that just answered OK goes back to the pool.
    if (h.code == 0) release(std::move(conn));

    if (h.code != 0) {
      proto::Reader r(body.data(), body.size());
      std::string message = r.str();
      if (!r.done()) badResponse();
      if (h.code == static_cast<uint8_t>(ErrorCode::kTimeout)) {  // message: the missing key
        store::throwWaitTimeout(where_, "key " + store::quoteKey(message), timeout);
      }
      const bool known = h.code <= static_cast<uint8_t>(ErrorCode::kInternal);
      ErrorCode code = known ? static_cast<ErrorCode>(h.code) : ErrorCode::kInternal;
      // The text comes off the network: never empty, no control bytes, bounded.
      std::string shown = message.empty() ? "an error without a message" : printable(message);
      if (!known) shown = "unknown status " + std::to_string(h.code) + ": " + shown;
      throw Error(code, shown + " (from " + where_ + ")");
    }
    return body;
  }

  // The failed connection is dropped by the caller's Fd going out of scope.
  [[noreturn]] void fail(const IoResult& io, const std::string& what,
                         std::chrono::milliseconds timeout) const {
    switch (io.status) {
      case IoStatus::kTimeout:
        store::throwWaitTimeout(where_, what, timeout);
      case IoStatus::kClosed:
        throw Error(ErrorCode::kPeerFailure,
                    "tcp store: lost connection to server " + addr_ + " during " + what);
      default:
        throw Error(ErrorCode::kPeerFailure, "tcp store: lost connection to server " + addr_ +
                                                 " during " + what + ": " + errnoText(io.err));
    }
  }

  // An idle connection that the server has not closed meanwhile, or a new one.
  Fd acquire(const Deadline& deadline, std::chrono::milliseconds timeout) {
    while (true) {
      Fd fd;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (idle_.empty()) break;
        fd = std::move(idle_.back());
        idle_.pop_back();
      }
      // Between requests the server never sends anything: readiness means EOF or an error.
      pollfd p{fd.get(), POLLIN | POLLRDHUP, 0};
      if (::poll(&p, 1, 0) == 0) return fd;
    }
    return connect(deadline, timeout);
  }

  void release(Fd fd) {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(fd));
  }

  // Connects, retrying with a growing sleep until the deadline.
  Fd connect(const Deadline& deadline, std::chrono::milliseconds timeout) const {
    std::string last_error = "no attempt made";
    auto delay = std::chrono::milliseconds(10);
    while (true) {
      bool transient = false;
      net::AddrInfoPtr addrs = net::resolveTcp(host_, port_, false, &last_error, &transient);
      for (addrinfo* ai = addrs.get(); ai != nullptr; ai = ai->ai_next) {
        Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                       ai->ai_protocol));
        if (!fd.valid()) {
          last_error = "socket: " + errnoText(errno);
          continue;
        }
        if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0) {
          setNoDelay(fd.get());
          return authenticated(std::move(fd), deadline);
        }
        if (errno != EINPROGRESS) {
          last_error = "connect: " + errnoText(errno);
          continue;
        }
        pollfd p{fd.get(), POLLOUT, 0};
        int rc = 0;
        do {
          rc = ::poll(&p, 1, deadline.remainingMs());
        } while (rc < 0 && errno == EINTR);
        if (rc <= 0) {
          last_error = rc == 0 ? "connect: timed out" : "poll: " + errnoText(errno);
          continue;
        }
        int so_error = 0;
        socklen_t len = sizeof(so_error);
        if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
        if (so_error == 0) {
          setNoDelay(fd.get());
          return authenticated(std::move(fd), deadline);
        }
        last_error = "connect: " + errnoText(so_error);
      }
      if (deadline.expired()) break;
      auto left = deadline.at() - Clock::now();
      std::this_thread::sleep_for(std::min<Clock::duration>(delay, left));
      delay = std::min(delay * 2, std::chrono::milliseconds(200));
      if (deadline.expired()) break;
    }
    throw Error(ErrorCode::kTimeout, "tcp store: could not connect to server " + addr_ +
                                         " within " + std::to_string(timeout.count()) +
                                         " ms (last error: " + last_error + ")");
  }

  // Runs the handshake on a new connection when this process has a key.
  Fd authenticated(Fd fd, const Deadline& deadline) const {
    if (!auth_.key) return fd;
    auth::ClientResult r =
        auth::authenticateToServer(fd.get(), *auth_.key, kStoreContext, deadline);
    if (r.ok()) return fd;
    const std::string prefix = "tcp store: authentication with server " + addr_ + " failed: ";
    switch (r.outcome) {
      case auth::ClientOutcome::kTimeout:
        throw Error(ErrorCode::kTimeout, prefix + r.why);
      case auth::ClientOutcome::kRefused:
        throw Error(ErrorCode::kInvalidArgument,
                    prefix + r.why + auth_.describeKey() +
                        "; the store and every rank need the job's key file");
      default:
        throw Error(ErrorCode::kInvalidArgument, prefix + r.why + auth_.describeKey());
    }
  }

  const std::string host_;
  const int port_;
  const std::chrono::milliseconds timeout_;
  const std::string addr_;
  const std::string where_;
  const auth::AuthSettings auth_;
  std::mutex mu_;
  std::vector<Fd> idle_;
  std::atomic<bool> readsMany_{true};  // false once the server turned MGET down
};

}  // namespace

std::shared_ptr<Store> makeTcpStore(const std::string& host, int port,
                                    std::chrono::milliseconds timeout) {
  return makeTcpStore(host, port, timeout, AuthOptions::fromEnv());
}

std::shared_ptr<Store> makeTcpStore(const std::string& host, int port,
                                    std::chrono::milliseconds timeout, const AuthOptions& auth) {
  return std::make_shared<TcpStore>(host, port, timeout, auth);
}

}  // namespace chorus
