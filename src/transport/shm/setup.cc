#include "transport/shm/setup.h"

#include "common/socket_io.h"

#include <chorus/error.hpp>

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

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

}  // namespace

SharedSetup setUp(Store& store, int rank, const std::vector<std::string>& hosts,
                  const std::vector<int>& fds, const JobId& job, const Options& options,
                  Deadline deadline) {
  SharedSetup out;
  std::vector<int> peers = sharedPeersOf(rank, hosts, options);
  if (peers.empty()) return out;
  const size_t ringBytes = (options.shmRingBytes + kCacheLine - 1) / kCacheLine * kCacheLine;
  out.self = Segment::create(job.data(), rank, static_cast<uint32_t>(hosts.size()));
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
    PeerLink link;
    link.peer = p;
    uint8_t mine = 0;
    std::string failure;
    if (parsed && static_cast<size_t>(peerRing) == ringBytes) {
      try {
        link.peerSegment =
            Segment::open(static_cast<int>(pid), static_cast<int>(fd), job.data(), p);
        if (link.peerSegment.header().entries != hosts.size()) {
          throw Error(ErrorCode::kSystem, "rank " + std::to_string(p) +
                                              "'s shared memory is laid out for another size");
        }
        mine |= 1;
        // Single copy needs the kernel to let this process read the peer's memory.
        uint64_t magic = 0;
        iovec local{&magic, sizeof(magic)};
        iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(addr)), sizeof(magic)};
        if (::process_vm_readv(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0) ==
                static_cast<ssize_t>(sizeof(magic)) &&
            magic == kSegmentMagic) {
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
      if (options.transport == TransportKind::kShm) {
        throw Error(ErrorCode::kSystem,
                    "CHORUS_TRANSPORT=shm, but shared memory with rank " + std::to_string(p) +
                        " failed: " + (failure.empty() ? "the peer could not map ours" : failure));
      }
      continue;  // this pair stays on TCP
    }
    ChannelConfig& c = link.config;
    c.rank = rank;
    c.peer = p;
    c.peerPid = static_cast<int>(pid);
    std::copy(job.begin(), job.end(), c.job.begin());
    c.outEntry = &out.self.entry(p);
    c.inEntry = &link.peerSegment.entry(rank);
    c.ringBytes = ringBytes;
    c.peerHeader = &link.peerSegment.header();
    c.singleCopyBytes = (theirs & 2) ? options.shmSingleCopyBytes : 0;
    out.links.push_back(std::move(link));
  }
  return out;
}

}  // namespace chorus::transport::shm
