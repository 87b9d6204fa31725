#include "transport/tcp/mesh.h"

#include "transport/tcp/hello.h"

#include <chorus/error.hpp>

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

namespace chorus::transport::tcp {
namespace {

JobId agreeJobId(Store& store, int rank, Deadline deadline) {
  JobId id{};
  if (rank == 0) {
    if (getrandom(id.data(), id.size(), 0) != static_cast<ssize_t>(id.size())) {
      throw Error(ErrorCode::kSystem, "getrandom: " + errnoText(errno));
    }
    store.set("job", Store::Bytes(id.begin(), id.end()));
    return id;
  }
  auto v = store.get("job", std::chrono::milliseconds(deadline.remainingMs()));
  if (v.size() != id.size()) throw Error(ErrorCode::kInternal, "bad job id in the store");
  std::memcpy(id.data(), v.data(), id.size());
  return id;
}

// The published record of a rank: "ip:port host-id". The host id (hostname + boot id) tells
// which peers share this machine, also when they live in different network namespaces.
struct PeerRecord {
  std::string address;
  std::string host;
};

std::string thisHostId() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string id = name;
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = {};
    if (std::fgets(boot, sizeof(boot), f)) id += std::string("/") + boot;
    std::fclose(f);
  }
  id.erase(std::remove_if(id.begin(), id.end(), [](char c) { return c == ' ' || c == '\n'; }),
           id.end());
  return id;
}

PeerRecord peerRecordOf(Store& store, int peer, Deadline deadline) {
  auto v =
      store.get("addr/" + std::to_string(peer), std::chrono::milliseconds(deadline.remainingMs()));
  std::string s(v.begin(), v.end());
  auto space = s.find(' ');
  if (space == std::string::npos) return PeerRecord{s, ""};
  return PeerRecord{s.substr(0, space), s.substr(space + 1)};
}

// Connects to a lower rank and exchanges hellos.
Connection dial(Store& store, int rank, int size, int peer, const JobId& job, const Options& opt,
                Deadline deadline) {
  PeerRecord record = peerRecordOf(store, peer, deadline);
  const std::string& address = record.address;
  Fd fd = connectTo(parseAddress(address), opt.socketBufferBytes, deadline);
  uint8_t buf[kHelloBytes];
  encodeHello(Hello{1, job, rank, peer, size}, buf);
  std::string why;
  if (!sendAll(fd.get(), buf, kHelloBytes, deadline, &why) ||
      !recvAll(fd.get(), buf, kHelloBytes, deadline, &why)) {
    throw Error(ErrorCode::kPeerFailure,
                "connecting to rank " + std::to_string(peer) + " (" + address + "): " + why);
  }
  auto reply = decodeHello(buf, &why);
  if (!reply || reply->kind != 2 || reply->job != job || reply->from != peer || reply->to != rank) {
    throw Error(ErrorCode::kPeerFailure,
                "rank " + std::to_string(peer) + " (" + address +
                    ") refused the connection: " + (reply ? "wrong job or rank" : why));
  }
  return Connection{peer, std::move(fd), address, record.host};
}

// Accepts connections until every higher rank has said hello. Strays (garbage, another job,
// a duplicate rank) are closed without disturbing the others.
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
      if (!sendAll(p.fd.get(), reply, kHelloBytes, deadline, &why)) {
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

// Ranks of this host that outnumber its cores must yield while they poll, or they steal the
// core the awaited peer needs.
TcpTransport::Spin spinFor(const Options& options, const std::string& host,
                           const std::vector<Connection>& conns) {
  long local = 1;
  for (const auto& c : conns) local += c.host == host;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  TcpTransport::Spin s;
  s.yield = local > cores;
  // Measured on the emulated cluster (8-byte all-reduce): 50 us without yielding at 2 ranks on
  // 2 cores; 200 us with yielding at 4 and 8 ranks on 2 cores (longer spins lose again).
  s.duration = std::chrono::microseconds(options.spinMicros >= 0 ? options.spinMicros
                                         : s.yield               ? 200
                                                                 : 50);
  return s;
}

}  // namespace

std::unique_ptr<TcpTransport> connectMesh(Store& store, int rank, int size, const Options& options,
                                          const std::string& routeHost) {
  Deadline deadline = Deadline::after(options.timeout);
  std::string ip = chooseListenAddress(options.ifname, routeHost);
  int port = 0;
  Fd listener = listenOn(ip, options.socketBufferBytes, &port);
  const std::string host = thisHostId();
  std::string self = ip + ":" + std::to_string(port) + " " + host;
  store.set("addr/" + std::to_string(rank), Store::Bytes(self.begin(), self.end()));
  JobId job = agreeJobId(store, rank, deadline);

  std::vector<Connection> conns;
  for (int peer = 0; peer < rank; ++peer) {
    conns.push_back(dial(store, rank, size, peer, job, options, deadline));
  }
  for (auto& c : acceptHigher(listener.get(), rank, size, job, deadline)) {
    PeerRecord record = peerRecordOf(store, c.peer, deadline);
    c.address = record.address;
    c.host = record.host;
    conns.push_back(std::move(c));
  }
  auto spin = spinFor(options, host, conns);
  return std::make_unique<TcpTransport>(rank, size, std::move(listener), std::move(conns), spin);
}

}  // namespace chorus::transport::tcp
