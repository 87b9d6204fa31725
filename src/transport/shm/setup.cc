#include "transport/shm/setup.h"

#include "common/socket_io.h"

#include <chorus/error.hpp>

#include <sys/uio.h>
#include <unistd.h>

namespace chorus::transport::shm {
namespace {

// Ranks that exchange data through shared memory with this one, in rank order.
std::vector<int> sharedPeersOf(int rank, const std::vector<std::string>& hosts,
                               const Options& options) {
  std::vector<int> peers;
  if (options.transport == TransportKind::kTcp) return peers;
  for (int p = 0; p < static_cast<int>(hosts.size()); ++p) {
    if (p == rank) continue;
    if (hosts[static_cast<size_t>(p)] == hosts[static_cast<size_t>(rank)]) {
      peers.push_back(p);
    } else if (options.transport == TransportKind::kShm) {
      throw Error(ErrorCode::kInvalidArgument,
                  "CHORUS_TRANSPORT=shm, but rank " + std::to_string(p) + " is on host '" +
                      hosts[static_cast<size_t>(p)] + "' and this rank on '" +
                      hosts[static_cast<size_t>(rank)] + "'");
    }
  }
  return peers;
}

// Where a rank's segment is: its process, the descriptor to open through /proc, its address (to
// try a single-copy read) and the ring size it uses.
struct Where {
  int64_t pid = 0;
  int64_t fd = -1;
  uint64_t address = 0;
  uint64_t ringBytes = 0;
};

void sendTo(int sock, int peer, const void* data, size_t bytes, Deadline deadline) {
  IoResult io = sendAll(sock, data, bytes, deadline);
  if (!io.ok()) {
    throw Error(ErrorCode::kPeerFailure,
                "shared-memory setup with rank " + std::to_string(peer) + ": " + io.text());
  }
}

void recvFrom(int sock, int peer, void* data, size_t bytes, Deadline deadline) {
  IoResult io = recvAll(sock, data, bytes, deadline);
  if (!io.ok()) {
    throw Error(ErrorCode::kPeerFailure,
                "shared-memory setup with rank " + std::to_string(peer) + ": " + io.text());
  }
}

}  // namespace

SharedSetup setUp(int rank, const std::vector<std::string>& hosts, const std::vector<int>& fds,
                  const JobId& job, const Options& options, Deadline deadline) {
  SharedSetup out;
  std::vector<int> peers = sharedPeersOf(rank, hosts, options);
  if (peers.empty()) return out;
  const size_t ringBytes = (options.shmRingBytes + kCacheLine - 1) / kCacheLine * kCacheLine;
  out.self = Segment::create(job.data(), rank, static_cast<uint32_t>(peers.size()), ringBytes);
  // Where this rank's segment is, sent to every peer over its connection: through the store it
  // would take a round trip to one server per pair, N (N - 1) of them on a host of N ranks.
  const Where self{static_cast<int64_t>(::getpid()), out.self.fd(), out.self.address(),
                   static_cast<uint64_t>(ringBytes)};
  for (int p : peers) sendTo(fds[static_cast<size_t>(p)], p, &self, sizeof(self), deadline);

  // Then map every peer's segment and send the verdict, then collect theirs: one pass that
  // waited for each peer's answer in turn would queue every rank behind the slowest of its
  // lower-numbered peers, many times over with more ranks than cores.
  struct Pending {
    PeerLink link;
    int pid = 0;
    uint8_t mine = 0;
    std::string failure;
  };
  std::vector<Pending> pending(peers.size());
  for (size_t i = 0; i < peers.size(); ++i) {
    const int p = peers[i];
    const int sock = fds[static_cast<size_t>(p)];
    Pending& pe = pending[i];
    Where w;
    recvFrom(sock, p, &w, sizeof(w), deadline);
    pe.link.peer = p;
    pe.pid = static_cast<int>(w.pid);
    if (w.ringBytes == ringBytes) {
      try {
        pe.link.peerSegment =
            Segment::open(static_cast<int>(w.pid), static_cast<int>(w.fd), job.data(), p);
        pe.mine |= 1;
        // Single copy needs the kernel to let this process read the peer's memory.
        uint64_t magic = 0;
        iovec local{&magic, sizeof(magic)};
        iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(w.address)), sizeof(magic)};
        if (::process_vm_readv(static_cast<pid_t>(w.pid), &local, 1, &remote, 1, 0) ==
                static_cast<ssize_t>(sizeof(magic)) &&
            magic == kSegmentMagic) {
          pe.mine |= 2;
        }
      } catch (const Error& e) {
        pe.failure = e.what();
      }
    } else {
      pe.failure = "rank " + std::to_string(p) + " uses rings of " + std::to_string(w.ringBytes) +
                   " bytes, this rank " + std::to_string(ringBytes) +
                   " (different CHORUS_SHM_RING_BYTES?)";
    }
    sendTo(sock, p, &pe.mine, 1, deadline);
  }
  for (Pending& pe : pending) {
    const int p = pe.link.peer;
    uint8_t theirs = 0;
    recvFrom(fds[static_cast<size_t>(p)], p, &theirs, 1, deadline);
    if (!(pe.mine & 1) || !(theirs & 1)) {
      if (options.transport == TransportKind::kShm) {
        throw Error(
            ErrorCode::kSystem,
            "CHORUS_TRANSPORT=shm, but shared memory with rank " + std::to_string(p) +
                " failed: " + (pe.failure.empty() ? "the peer could not map ours" : pe.failure));
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
    const size_t i = static_cast<size_t>(&pe - pending.data());
    uint32_t outSlot =
        options.transport == TransportKind::kShm ? static_cast<uint32_t>(i) : slotOf(p, rank);
    uint32_t inSlot = options.transport == TransportKind::kShm
                          ? static_cast<uint32_t>(rank < p ? rank : rank - 1)
                          : slotOf(rank, p);
    ChannelConfig& c = pe.link.config;
    c.peer = p;
    c.peerPid = pe.pid;
    c.out = &out.self.control(outSlot);
    c.outData = out.self.data(outSlot);
    c.in = &pe.link.peerSegment.control(inSlot);
    c.inData = pe.link.peerSegment.data(inSlot);
    c.ringBytes = ringBytes;
    c.peerHeader = &pe.link.peerSegment.header();
    c.singleCopyBytes = (theirs & 2) ? options.shmSingleCopyBytes : 0;
    const SegmentIdentity& myId = out.self.header().id;
    const SegmentIdentity& theirId = pe.link.peerSegment.header().id;
    c.syncKeys = RingSyncKeys::of(ringSyncKey(myId.job, myId.rank, outSlot),
                                  ringSyncKey(theirId.job, theirId.rank, inSlot));
    out.links.push_back(std::move(pe.link));
  }
  return out;
}

}  // namespace chorus::transport::shm
