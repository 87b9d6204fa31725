#include "transport/tcp/dial.h"

#include "common/errno_text.h"
#include "common/socket_io.h"
#include "transport/tcp/endpoint.h"
#include "transport/tcp/hello.h"

#include <chorus/error.hpp>

#include <poll.h>
#include <sys/socket.h>

#include <map>

namespace chorus::transport::tcp {

Connection dialLower(const std::string& address, int rank, int size, int peer, const JobId& job,
                     int bufferBytes, Deadline deadline) {
  Fd fd = connectTo(parseAddress(address), bufferBytes, deadline);
  uint8_t buf[kHelloBytes];
  encodeHello(Hello{1, job, rank, peer, size}, buf);
  IoResult io = sendAll(fd.get(), buf, kHelloBytes, deadline);
  if (io.ok()) io = recvAll(fd.get(), buf, kHelloBytes, deadline);
  if (!io.ok()) {
    throw Error(ErrorCode::kPeerFailure,
                "connecting to rank " + std::to_string(peer) + " (" + address + "): " + io.text());
  }
  std::string why;
  auto reply = decodeHello(buf, &why);
  if (!reply || reply->kind != 2 || reply->job != job || reply->from != peer || reply->to != rank) {
    throw Error(ErrorCode::kPeerFailure,
                "rank " + std::to_string(peer) + " (" + address +
                    ") refused the connection: " + (reply ? "wrong job or rank" : why));
  }
  return Connection{peer, std::move(fd), address, ""};
}

std::vector<Connection> acceptHigher(int listener, int rank, int size, const JobId& job,
                                     Deadline deadline) {
  struct Pending {
    Fd fd;
    std::string address;
    uint8_t buf[kHelloBytes];
    size_t got = 0;
    Clock::time_point since;
  };
  std::vector<Connection> done;
  std::map<int, bool> have;
  std::vector<Pending> pending;
  const int expected = size - 1 - rank;
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
      sockaddr_in from{};
      socklen_t len = sizeof(from);
      int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&from), &len,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) pending.push_back(Pending{Fd(fd), formatAddress(from), {}, 0, Clock::now()});
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      Pending& p = pending[i - 1];
      if (!(fds[i].revents & (POLLIN | POLLERR | POLLHUP))) continue;
      ssize_t k = ::recv(p.fd.get(), p.buf + p.got, kHelloBytes - p.got, MSG_DONTWAIT);
      if (k <= 0) {
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        p.fd.reset();
        continue;
      }
      p.got += static_cast<size_t>(k);
      if (p.got < kHelloBytes) continue;
      std::string why;
      auto h = decodeHello(p.buf, &why);
      if (!h || h->kind != 1 || h->job != job || h->to != rank || h->from <= rank ||
          h->from >= size || h->worldSize != size || have.count(h->from)) {
        p.fd.reset();  // not ours: drop it
        continue;
      }
      uint8_t reply[kHelloBytes];
      encodeHello(Hello{2, job, rank, h->from, size}, reply);
      if (!sendAll(p.fd.get(), reply, kHelloBytes, deadline).ok()) {
        p.fd.reset();
        continue;
      }
      have[h->from] = true;
      // The dialer reports its listening address in the store; show that one in messages.
      done.push_back(Connection{h->from, std::move(p.fd), p.address, ""});
    }
    // Forget closed sockets and connections that stay silent (a hello is 72 bytes).
    std::erase_if(pending, [](const Pending& p) {
      return !p.fd || Clock::now() - p.since > std::chrono::seconds(10);
    });
  }
  return done;
}

}  // namespace chorus::transport::tcp
