// Measures what connecting costs: run under chorus-run, each rank creates N communicators in turn
// from CHORUS_STORE (store client, rendezvous, every TCP connection and, with a key, every
// handshake) and times each creation up to a barrier on it; rank 0 prints the median and the
// minimum over the creations of the slowest rank's time. docs/security.md shows the figures with
// and without authentication.
//   chorus-run -n 8 -- auth_setup_time [N]
// With --handshakes N it times N loopback TCP connections (connect and accept) with and without
// the handshake instead, each side on its own thread, and prints microseconds per connection.
#include "auth/client_handshake.h"
#include "auth/server_handshake.h"
#include "common/fd.h"

#include <chorus/chorus.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <thread>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
const std::vector<uint8_t> kContext = {'b', 'e', 'n', 'c', 'h'};

// Microseconds per connection of n connections to a listener on 127.0.0.1, authenticated or not.
double perConnectionMicros(int n, bool authenticate) {
  const chorus::auth::JobKey key = chorus::auth::JobKey::random();
  chorus::Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(listener.get(), 128) != 0 ||
      ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::perror("listen");
    std::exit(1);
  }
  std::thread server([&] {
    for (int i = 0; i < n; ++i) {
      chorus::Fd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      uint8_t byte = 0;
      if (authenticate) {
        chorus::auth::ServerHandshake hs(key, kContext);
        uint8_t buf[128];
        while (hs.state() == chorus::auth::ServerHandshake::State::kRunning) {
          ssize_t k = ::recv(fd.get(), buf, sizeof(buf), 0);
          if (k <= 0) break;
          hs.take(buf, static_cast<size_t>(k));
          if (!hs.output().empty()) {
            (void)::send(fd.get(), hs.output().data(), hs.output().size(), MSG_NOSIGNAL);
          }
          hs.output().clear();
        }
      }
      (void)::send(fd.get(), &byte, 1, MSG_NOSIGNAL);  // the connection is ready
    }
  });
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    chorus::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      std::perror("connect");
      std::exit(1);
    }
    if (authenticate) {
      auto r = chorus::auth::authenticateToServer(
          fd.get(), key, kContext, chorus::Deadline::after(std::chrono::seconds(10)));
      if (!r.ok()) {
        std::fprintf(stderr, "handshake failed: %s\n", r.why.c_str());
        std::exit(1);
      }
    }
    uint8_t byte;
    (void)::recv(fd.get(), &byte, 1, MSG_WAITALL);
  }
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n;
  server.join();
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "--handshakes") {
    const int n = std::atoi(argv[2]);
    for (int round = 0; round < 3; ++round) {
      std::printf("connections=%d plain_us=%.1f authenticated_us=%.1f\n", n,
                  perConnectionMicros(n, false), perConnectionMicros(n, true));
    }
    return 0;
  }
  const int n = argc > 1 ? std::atoi(argv[1]) : 20;
  const char* url = std::getenv("CHORUS_STORE");
  const char* rankText = std::getenv("CHORUS_RANK");
  const char* sizeText = std::getenv("CHORUS_WORLD_SIZE");
  if (url == nullptr || rankText == nullptr || sizeText == nullptr || n < 1) {
    std::fprintf(stderr, "usage: chorus-run -n N -- auth_setup_time [CREATIONS]\n");
    return 2;
  }
  const int rank = std::atoi(rankText);
  const int size = std::atoi(sizeText);
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto comm = chorus::Communicator::create(url, rank, size);
    comm->barrier().wait();
    double mine =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    comm->allReduce(std::span<double>(&mine, 1), chorus::ReduceOp::kMax).wait();
    ms.push_back(mine);
  }
  std::sort(ms.begin(), ms.end());
  if (rank == 0) {
    std::printf("ranks=%d creations=%d median_ms=%.2f min_ms=%.2f\n", size, n, ms[ms.size() / 2],
                ms.front());
  }
  return 0;
}
