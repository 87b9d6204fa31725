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
    Link& l = link(s.peer);
    l.shmSegment = std::move(s.peerSegment);
    l.shm = std::make_unique<shm::Channel>(s.config);
    sharedPeers_.push_back(s.peer);
  }
  onlyShared_ = static_cast<int>(sharedPeers_.size()) == size_ - 1;
}

bool PeerTransport::sharedBusy() const {
  for (int p : sharedPeers_) {
    const Link& l = links_[static_cast<size_t>(p)];
    if (l.shm && (l.shm->sending() || l.shm->receiving())) return true;
  }
  return false;
}

bool PeerTransport::pumpShared() {
  bool moved = false;
  for (int p : sharedPeers_) {
    Link& l = links_[static_cast<size_t>(p)];
    if (!l.shm || !(l.shm->sending() || l.shm->receiving())) continue;
    moved |= pumpLink(l);
    if (l.in == Inbound::kGone &&
        (l.shm->sending() || (l.shm->receiving() && !l.shm->inboundPending()))) {
      gone(l);
    }
  }
  return moved;
}

bool PeerTransport::pumpLink(Link& l) {
  uint64_t abortedAt = l.shm->peerAbortedAt();
  if (abortedAt != 0 && inOp_ && abortedAt - 1 <= current_.seq) sharedPeerAborted(l);
  bool wake = false;
  bool moved = l.shm->pump(current_, wake);
  if (wake) sendWake(l);
  return moved;
}

void PeerTransport::sharedPeerAborted(Link& l) {
  // The reason follows on the TCP connection; read it (it throws), waiting a little for it.
  Deadline deadline = Deadline::after(std::chrono::seconds(1));
  while (!deadline.expired() && l.in != Inbound::kGone) {
    onReadable(l);
    pollfd p{l.fd.get(), POLLIN, 0};
    ::poll(&p, 1, deadline.remainingMs(100));
  }
  abortFrom_ = l.peer;
  throw Error(ErrorCode::kPeerFailure,
              "rank " + std::to_string(l.peer) + " (" + l.address + ") aborted its communicator");
}

void PeerTransport::sendWake(Link& l) noexcept {
  if (!l.fd || l.in == Inbound::kGone || broken_) return;
  FrameHeader h;
  h.kind = FrameKind::kWake;
  h.op = current_;
  uint8_t header[kFrameHeaderBytes];
  encodeFrame(h, header);
  // Control frames are never interleaved with data on this socket, so a frame is only cut short
  // by a full socket buffer; finish it (a sleeping peer drains the socket as soon as it wakes).
  sendAll(l.fd.get(), header, kFrameHeaderBytes, Deadline::after(std::chrono::seconds(1)));
}

}  // namespace chorus::transport
