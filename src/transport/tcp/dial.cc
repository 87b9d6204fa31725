#include "transport/tcp/dial.h"

#include "auth/client_handshake.h"
#include "auth/handshake_messages.h"
#include "auth/record_cipher.h"
#include "auth/refusal_log.h"
#include "auth/server_handshake.h"
#include "common/errno_text.h"
#include "common/socket_io.h"
#include "transport/tcp/endpoint.h"
#include "transport/tcp/hello.h"

#include <chorus/error.hpp>

#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <map>
#include <memory>

namespace chorus::transport::tcp {
namespace {

// What a rank's handshake proves: knowledge of the key for this communicator (its job id), so a
// proof for one communicator is worth nothing at another one's listener.
std::vector<uint8_t> rankContext(const JobId& job) {
  static constexpr char kLabel[4] = {'r', 'a', 'n', 'k'};
  std::vector<uint8_t> c(sizeof(kLabel) + job.size());
  std::memcpy(c.data(), kLabel, sizeof(kLabel));
  std::memcpy(c.data() + sizeof(kLabel), job.data(), job.size());
  return c;
}

// Both sides of a connection must agree on encryption; the hello says what each does.
std::string encryptionMismatch(const std::string& who, bool mine) {
  return who + (mine ? " does not encrypt" : " encrypts (CHORUS_ENCRYPT=1)") +
         " its connections and this rank " + (mine ? "does (CHORUS_ENCRYPT=1)" : "does not") +
         ": every rank of a job needs the same CHORUS_ENCRYPT";
}

std::unique_ptr<SealedStream> sealedStream(const auth::JobKey* key, auth::Role self,
                                           const std::vector<uint8_t>& context,
                                           const auth::Nonce& clientNonce,
                                           const auth::Nonce& serverNonce) {
  return std::make_unique<SealedStream>(
      auth::deriveStreamKeys(*key, self, context, clientNonce, serverNonce));
}

}  // namespace

Connection dialLower(const std::string& address, int rank, int size, int peer, const JobId& job,
                     const auth::JobKey* key, bool encrypt, int bufferBytes, bool zeroCopy,
                     Deadline deadline) {
  if (encrypt && key == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, "CHORUS_ENCRYPT=1 needs a key (CHORUS_AUTH_KEY_FILE)");
  }
  Fd fd = connectTo(net::resolveAddress(address), bufferBytes, zeroCopy, deadline);
  const std::string who = "rank " + std::to_string(peer) + " (" + address + ")";
  auth::ClientResult r;
  if (key != nullptr) {
    r = auth::authenticateToServer(fd.get(), *key, rankContext(job), deadline);
    if (r.outcome == auth::ClientOutcome::kRefused) {
      throw Error(ErrorCode::kInvalidArgument,
                  "authentication with " + who + " failed: " + r.why +
                      "; every rank needs the same key file (CHORUS_AUTH_KEY_FILE)");
    }
    if (!r.ok()) {
      throw Error(r.outcome == auth::ClientOutcome::kTimeout ? ErrorCode::kTimeout
                                                             : ErrorCode::kPeerFailure,
                  "authentication with " + who + " failed: " + r.why);
    }
  }
  uint8_t buf[kHelloBytes];
  const uint16_t flags = encrypt ? kHelloEncrypted : 0;
  encodeHello(Hello{1, job, rank, peer, size, flags}, buf);
  IoResult io = sendAll(fd.get(), buf, kHelloBytes, deadline);
  if (io.ok()) io = recvAll(fd.get(), buf, kHelloBytes, deadline);
  if (!io.ok()) {
    throw Error(ErrorCode::kPeerFailure,
                "connecting to " + who + ": " + io.text() +
                    (key == nullptr && io.status == IoStatus::kClosed
                         ? " (does that rank require authentication? CHORUS_AUTH_KEY_FILE)"
                         : ""));
  }
  std::string why;
  auto reply = decodeHello(buf, &why);
  if (!reply || reply->kind != 2 || reply->job != job || reply->from != peer || reply->to != rank) {
    throw Error(ErrorCode::kPeerFailure,
                who + " refused the connection: " + (reply ? "wrong job or rank" : why));
  }
  if (reply->flags != flags) {
    throw Error(ErrorCode::kInvalidArgument, "connecting to " + encryptionMismatch(who, encrypt));
  }
  Connection c{peer, std::move(fd), address, "", nullptr, {}};
  if (encrypt) {
    c.sealed =
        sealedStream(key, auth::Role::kClient, rankContext(job), r.clientNonce, r.serverNonce);
  }
  return c;
}

std::vector<Connection> acceptHigher(int listener, int rank, int size, const JobId& job,
                                     const auth::JobKey* key, bool encrypt,
                                     std::chrono::milliseconds handshakeTime, Deadline deadline) {
  if (encrypt && key == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, "CHORUS_ENCRYPT=1 needs a key (CHORUS_AUTH_KEY_FILE)");
  }
  struct Pending {
    Fd fd;
    std::string address;
    std::unique_ptr<auth::ServerHandshake> handshake;  // until the peer has proved the key
    std::unique_ptr<SealedStream> sealed;              // the keys, once it has (encrypting)
    uint8_t buf[kHelloBytes];
    size_t got = 0;
    Clock::time_point since;
  };
  const std::vector<uint8_t> context = rankContext(job);
  std::vector<Connection> done;
  std::map<int, bool> have;
  std::vector<Pending> pending;
  const int expected = size - 1 - rank;
  // Feeds the handshake; returns false when the connection is to be dropped. Leftover bytes
  // (the hello, if the peer sent it early) go to the hello buffer.
  auto authenticate = [&](Pending& p, const uint8_t* data, size_t n) {
    size_t used = p.handshake->take(data, n);
    auto& out = p.handshake->output();
    if (!out.empty()) {
      IoResult io = sendAll(p.fd.get(), out.data(), out.size(), deadline);
      out.clear();
      if (!io.ok()) return false;
    }
    switch (p.handshake->state()) {
      case auth::ServerHandshake::State::kRefused:
        auth::logRefusal("authentication failed", p.address, p.handshake->failure());
        return false;
      case auth::ServerHandshake::State::kAccepted: {
        if (encrypt) {
          p.sealed = sealedStream(key, auth::Role::kServer, context, p.handshake->clientNonce(),
                                  p.handshake->serverNonce());
        }
        p.handshake.reset();
        size_t rest = std::min(n - used, kHelloBytes);
        std::memcpy(p.buf, data + used, rest);
        p.got = rest;
        return true;
      }
      case auth::ServerHandshake::State::kRunning:
        return true;
    }
    return false;
  };
  while (static_cast<int>(done.size()) < expected) {
    if (deadline.expired()) {
      std::string missing;
      for (int r = rank + 1; r < size; ++r) {
        if (!have.count(r)) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      throw Error(ErrorCode::kTimeout, "timed out waiting for ranks " + missing + " to connect");
    }
    std::vector<pollfd> fds{{listener, POLLIN, 0}};
    for (auto& p : pending) fds.push_back({p.fd.get(), POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), deadline.remainingMs(200));
    if (n < 0 && errno != EINTR) throw Error(ErrorCode::kSystem, "poll: " + errnoText(errno));
    if (fds[0].revents & POLLIN) {
      net::SocketAddress from;
      from.length = sizeof(from.storage);
      int fd = ::accept4(listener, from.get(), &from.length, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        Pending p{Fd(fd), from.text(), nullptr, nullptr, {}, 0, Clock::now()};
        if (key != nullptr) p.handshake = std::make_unique<auth::ServerHandshake>(*key, context);
        pending.push_back(std::move(p));
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      Pending& p = pending[i - 1];
      if (!(fds[i].revents & (POLLIN | POLLERR | POLLHUP))) continue;
      if (p.handshake) {
        uint8_t chunk[256];
        ssize_t k = ::recv(p.fd.get(), chunk, sizeof(chunk), MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (k <= 0) {
          auth::logRefusal("authentication failed", p.address, "closed during the handshake");
          p.fd.reset();
          continue;
        }
        if (!authenticate(p, chunk, static_cast<size_t>(k))) {
          p.fd.reset();
          continue;
        }
        if (p.handshake || p.got < kHelloBytes) continue;
      } else {
        ssize_t k = ::recv(p.fd.get(), p.buf + p.got, kHelloBytes - p.got, MSG_DONTWAIT);
        if (k <= 0) {
          if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
          p.fd.reset();
          continue;
        }
        p.got += static_cast<size_t>(k);
        if (p.got >= 4 && auth::startsHandshake(p.buf, p.got)) {
          // A peer with a key, this rank without: it would wait for an answer that never comes.
          auth::logRefusal("authentication failed", p.address,
                           "the peer authenticates with a key, this rank has none");
          p.fd.reset();
          continue;
        }
        if (p.got < kHelloBytes) continue;
      }
      std::string why;
      auto h = decodeHello(p.buf, &why);
      if (!h || h->kind != 1 || h->job != job || h->to != rank || h->from <= rank ||
          h->from >= size || h->worldSize != size || have.count(h->from)) {
        p.fd.reset();  // not ours: drop it
        continue;
      }
      const uint16_t flags = encrypt ? kHelloEncrypted : 0;
      uint8_t reply[kHelloBytes];
      encodeHello(Hello{2, job, rank, h->from, size, flags}, reply);
      if (!sendAll(p.fd.get(), reply, kHelloBytes, deadline).ok()) {
        p.fd.reset();
        continue;
      }
      if (h->flags != flags) {
        // The reply told the dialer, too; both fail naming the setting.
        throw Error(ErrorCode::kInvalidArgument,
                    "accepting " +
                        encryptionMismatch(
                            "rank " + std::to_string(h->from) + " (" + p.address + ")", encrypt));
      }
      have[h->from] = true;
      // The dialer reports its listening address in the store; show that one in messages.
      done.push_back(Connection{h->from, std::move(p.fd), p.address, "", std::move(p.sealed), {}});
    }
    // Forget closed sockets and connections that take too long (silent, or a byte at a time).
    std::erase_if(pending, [&](const Pending& p) {
      if (!p.fd) return true;
      if (Clock::now() - p.since <= handshakeTime) return false;
      if (p.handshake) {
        auth::logRefusal("authentication failed", p.address, "handshake timed out");
      }
      return true;
    });
  }
  return done;
}

}  // namespace chorus::transport::tcp
