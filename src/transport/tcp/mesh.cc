#include "transport/tcp/mesh.h"

#include "transport/shm/segment.h"
#include "transport/tcp/hello.h"

#include "common/errno_text.h"
#include "common/socket_io.h"
#include "transport/tcp/endpoint.h"

#include <chorus/error.hpp>

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
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

// The published record of a rank: "ip:port machine-id host-id". The machine id (hostname + boot
// id) tells which peers share this machine's cores, also when they live in different network
// namespaces; the host id (Options::hostId) which ones share memory and count as one host.
struct PeerRecord {
  std::string address;
  std::string machine;
  std::string host;
};

std::string thisMachineId() {
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

// Emulated hosts are network namespaces of one machine: tell them apart.
std::string thisHostId(const Options& options, const std::string& machine) {
  if (!options.hostId.empty()) return options.hostId;
  struct stat st {};
  std::string id = machine;
  if (::stat("/proc/self/ns/net", &st) == 0) id += "/net:" + std::to_string(st.st_ino);
  return id;
}

PeerRecord peerRecordOf(Store& store, int peer, Deadline deadline) {
  auto v =
      store.get("addr/" + std::to_string(peer), std::chrono::milliseconds(deadline.remainingMs()));
  std::string s(v.begin(), v.end());
  PeerRecord r;
  auto a = s.find(' ');
  r.address = s.substr(0, a);
  if (a == std::string::npos) return r;
  auto b = s.find(' ', a + 1);
  r.machine = s.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
  if (b != std::string::npos) r.host = s.substr(b + 1);
  return r;
}

// Connects to a lower rank and exchanges hellos.
Connection dial(Store& store, int rank, int size, int peer, const JobId& job, const Options& opt,
                Deadline deadline) {
  PeerRecord record = peerRecordOf(store, peer, deadline);
  const std::string& address = record.address;
  Fd fd = connectTo(parseAddress(address), opt.socketBufferBytes, deadline);
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
  return Connection{peer, std::move(fd), address, record.machine};
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

// Ranks of this host that outnumber its cores must yield while they poll, or they steal the
// core the awaited peer needs.
TcpTransport::Spin spinFor(const Options& options, const std::string& host,
                           const std::vector<Connection>& conns) {
  long local = 1;
  for (const auto& c : conns) local += c.host == host;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  TcpTransport::Spin s;
  s.yield = local > cores;
  // Measured on the emulated cluster (small all-reduces, fresh processes each run). With a core
  // per rank, a spin shorter than a sleeping peer's wake-up is bistable: once one side sleeps,
  // every reply comes late enough for the other to sleep too, and a run stayed at 160 us per
  // exchange instead of 18 (1 run in 4 at 50 us; none in 4 at 1000 us). With more ranks than
  // cores, 200 us with yielding did best at 4 and 8 ranks on 2 cores (0 and 1000 were slower).
  s.duration = std::chrono::microseconds(options.spinMicros >= 0 ? options.spinMicros
                                         : s.yield               ? 200
                                                                 : 1000);
  return s;
}

struct SharedSetup {
  shm::Segment self;
  std::vector<SharedLink> links;
};

// Ranks that exchange data through shared memory with this one, in rank order.
std::vector<int> sharedPeersOf(int rank, const std::vector<std::string>& hosts,
                               const Options& options) {
  std::vector<int> peers;
  if (options.transport == "tcp") return peers;
  for (int p = 0; p < static_cast<int>(hosts.size()); ++p) {
    if (p == rank) continue;
    if (hosts[static_cast<size_t>(p)] == hosts[static_cast<size_t>(rank)]) {
      peers.push_back(p);
    } else if (options.transport == "shm") {
      throw Error(ErrorCode::kInvalidArgument,
                  "CHORUS_TRANSPORT=shm, but rank " + std::to_string(p) + " is on host '" +
                      hosts[static_cast<size_t>(p)] + "' and this rank on '" +
                      hosts[static_cast<size_t>(rank)] + "'");
    }
  }
  return peers;
}

// Every rank creates a segment with one outgoing ring per peer on its host and publishes where
// it is ("shm/<rank>": pid, descriptor, address); each peer maps it, checks whether it can also
// read the creator's memory directly (single copy), and both sides confirm over their TCP
// connection, so a pair uses shared memory only when both ends could map it.
SharedSetup setUpSharedMemory(Store& store, int rank, const std::vector<std::string>& hosts,
                              const std::vector<int>& fds, const JobId& job, const Options& options,
                              Deadline deadline) {
  SharedSetup out;
  std::vector<int> peers = sharedPeersOf(rank, hosts, options);
  if (peers.empty()) return out;
  const size_t ringBytes =
      (options.shmRingBytes + shm::kCacheLine - 1) / shm::kCacheLine * shm::kCacheLine;
  out.self = shm::Segment::create(job.data(), rank, static_cast<uint32_t>(peers.size()), ringBytes);
  std::string where = std::to_string(::getpid()) + " " + std::to_string(out.self.fd()) + " " +
                      std::to_string(out.self.address()) + " " + std::to_string(ringBytes);
  store.set("shm/" + std::to_string(rank), Store::Bytes(where.begin(), where.end()));

  for (size_t i = 0; i < peers.size(); ++i) {
    const int p = peers[i];
    auto v =
        store.get("shm/" + std::to_string(p), std::chrono::milliseconds(deadline.remainingMs()));
    long long pid = 0, fd = 0, peerRing = 0;
    unsigned long long addr = 0;
    std::string text(v.begin(), v.end());
    bool parsed =
        std::sscanf(text.c_str(), "%lld %lld %llu %lld", &pid, &fd, &addr, &peerRing) == 4;
    SharedLink link;
    link.peer = p;
    uint8_t mine = 0;
    std::string failure;
    if (parsed && static_cast<size_t>(peerRing) == ringBytes) {
      try {
        link.peerSegment =
            shm::Segment::open(static_cast<int>(pid), static_cast<int>(fd), job.data(), p);
        mine |= 1;
        // Single copy needs the kernel to let this process read the peer's memory.
        uint64_t magic = 0;
        iovec local{&magic, sizeof(magic)};
        iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(addr)), sizeof(magic)};
        if (::process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0) ==
                static_cast<ssize_t>(sizeof(magic)) &&
            magic == shm::kSegmentMagic) {
          mine |= 2;
        }
      } catch (const Error& e) {
        failure = e.what();
      }
    } else {
      failure = "rank " + std::to_string(p) + " published '" + text +
                "' (different CHORUS_SHM_RING_BYTES?)";
    }
    uint8_t theirs = 0;
    int sock = fds[static_cast<size_t>(p)];
    IoResult io = sendAll(sock, &mine, 1, deadline);
    if (io.ok()) io = recvAll(sock, &theirs, 1, deadline);
    if (!io.ok()) {
      throw Error(ErrorCode::kPeerFailure,
                  "shared-memory setup with rank " + std::to_string(p) + ": " + io.text());
    }
    if (!(mine & 1) || !(theirs & 1)) {
      if (options.transport == "shm") {
        throw Error(ErrorCode::kSystem,
                    "CHORUS_TRANSPORT=shm, but shared memory with rank " + std::to_string(p) +
                        " failed: " + (failure.empty() ? "the peer could not map ours" : failure));
      }
      continue;  // this pair stays on TCP
    }
    // Ring index of peer p in this rank's segment and of this rank in p's: both number the
    // ranks of their host in rank order.
    auto slotOf = [&](int reader, int writer) {
      uint32_t k = 0;
      for (int q = 0; q < reader; ++q) {
        if (q != writer && hosts[static_cast<size_t>(q)] == hosts[static_cast<size_t>(writer)]) ++k;
      }
      return k;
    };
    shm::ChannelConfig& c = link.config;
    c.peer = p;
    c.peerPid = static_cast<int>(pid);
    uint32_t outSlot = options.transport == "shm" ? static_cast<uint32_t>(i) : slotOf(p, rank);
    uint32_t inSlot = options.transport == "shm" ? static_cast<uint32_t>(rank < p ? rank : rank - 1)
                                                 : slotOf(rank, p);
    c.out = &out.self.control(outSlot);
    c.outData = out.self.data(outSlot);
    c.in = &link.peerSegment.control(inSlot);
    c.inData = link.peerSegment.data(inSlot);
    c.ringBytes = ringBytes;
    c.peerHeader = &link.peerSegment.header();
    c.singleCopyBytes = (theirs & 2) ? options.shmSingleCopyBytes : 0;
    out.links.push_back(std::move(link));
  }
  return out;
}

}  // namespace

std::unique_ptr<TcpTransport> connectMesh(Store& store, int rank, int size, const Options& options,
                                          const std::string& routeHost) {
  Deadline deadline = Deadline::after(options.timeout);
  std::string ip = chooseListenAddress(options.ifname, routeHost);
  int port = 0;
  Fd listener = listenOn(ip, options.socketBufferBytes, &port);
  const std::string machine = thisMachineId();
  const std::string host = thisHostId(options, machine);
  if (host.find(' ') != std::string::npos) {
    throw Error(ErrorCode::kInvalidArgument, "host id '" + host + "' contains a space");
  }
  std::string self = ip + ":" + std::to_string(port) + " " + machine + " " + host;
  store.set("addr/" + std::to_string(rank), Store::Bytes(self.begin(), self.end()));
  JobId job = agreeJobId(store, rank, deadline);

  std::vector<Connection> conns;
  for (int peer = 0; peer < rank; ++peer) {
    conns.push_back(dial(store, rank, size, peer, job, options, deadline));
  }
  for (auto& c : acceptHigher(listener.get(), rank, size, job, deadline)) {
    PeerRecord record = peerRecordOf(store, c.peer, deadline);
    c.address = record.address;
    c.host = record.machine;
    conns.push_back(std::move(c));
  }
  std::vector<std::string> hosts(static_cast<size_t>(size));
  hosts[static_cast<size_t>(rank)] = host;
  for (const auto& c : conns) {
    hosts[static_cast<size_t>(c.peer)] = peerRecordOf(store, c.peer, deadline).host;
  }
  auto spin = spinFor(options, machine, conns);
  // The shared-memory handshake runs on the connections before the transport owns them.
  std::vector<int> fds(static_cast<size_t>(size), -1);
  for (const auto& c : conns) fds[static_cast<size_t>(c.peer)] = c.fd.get();
  SharedSetup shared = setUpSharedMemory(store, rank, hosts, fds, job, options, deadline);
  auto tx = std::make_unique<TcpTransport>(rank, size, std::move(listener), std::move(conns), spin);
  tx->setHosts(std::move(hosts));
  if (!shared.links.empty()) {
    tx->attachSharedMemory(std::move(shared.self), std::move(shared.links));
  }
  return tx;
}

}  // namespace chorus::transport::tcp
