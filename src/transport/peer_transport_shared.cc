// Peers on shared memory: pumping their rings, and their control frames on the socket.
#include "transport/peer_transport.h"

#include "common/errno_text.h"
#include "common/socket_io.h"
#include "transport/mismatch.h"
#include "transport/request_queue.h"

#include <chorus/error.hpp>

#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace chorus::transport {
void PeerTransport::attachSharedMemory(shm::Segment self, std::vector<shm::PeerLink> links) {
  shmSelf_ = std::move(self);
  for (auto& s : links) {
    const int peer = s.peer;
    tcp::TcpLink& control = *sockets_.at(static_cast<size_t>(peer));
    auto& ring = rings_[static_cast<size_t>(peer)];
    ring = std::make_unique<shm::ShmLink>(std::move(s), control, op_);
    data_[static_cast<size_t>(peer)] = ring.get();
    shared_.push_back(ring.get());
  }
  onlyShared_ = static_cast<int>(shared_.size()) == size_ - 1;
}

bool PeerTransport::reducesOnReceive(int peer) const {
  return peer >= 0 && peer < size_ && rings_[static_cast<size_t>(peer)] != nullptr;
}

void PeerTransport::postRecvReduce(Request& r, int peer, void* dst, const void* mine, size_t bytes,
                                   uint32_t step, CombineFn fn, size_t elementBytes) {
  if (!reducesOnReceive(peer) || elementBytes == 0 || shm::kCacheLine % elementBytes != 0) {
    throw Error(ErrorCode::kInternal,
                "receive-with-reduce from rank " + std::to_string(peer) + " over " + pathTo(peer));
  }
  Link& l = link(peer);
  r.start(peer, step, dst, bytes);
  r.combine = fn;
  r.mine = static_cast<const uint8_t*>(mine);
  r.elementBytes = static_cast<uint32_t>(elementBytes);
  l.postRecv(r);  // queued only: taken by the next pump
}

bool PeerTransport::sharedBusy() const {
  for (const shm::ShmLink* l : shared_) {
    if (l->busy()) return true;
  }
  return false;
}

bool PeerTransport::pumpShared() {
  bool moved = false;
  for (shm::ShmLink* l : shared_) {
    try {
      moved |= l->progress();
    } catch (const Error& e) {
      for (size_t q = 0; q < rings_.size(); ++q) {
        if (rings_[q].get() == l) notePeerError(static_cast<int>(q), e);
      }
      throw;
    }
  }
  return moved;
}

}  // namespace chorus::transport
