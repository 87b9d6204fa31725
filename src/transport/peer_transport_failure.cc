// Failures: a peer lost or gone, aborting (telling the peers why) and closing.
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

void PeerTransport::notePeerError(int peer, const Error& e) noexcept {
  // A peer whose abort message was read is alive and said why; a mismatch is not a failure.
  if (e.code() == ErrorCode::kPeerFailure && op_.abortFrom != peer) notePeerFailed(peer);
}

void PeerTransport::notePeerFailed(int peer) noexcept {
  if (peer >= 0 && peer < size_ && peer != rank_) {
    peerFailed_[static_cast<size_t>(peer)].store(true, std::memory_order_release);
  }
}

std::vector<int> PeerTransport::failedPeers() const {
  std::vector<int> out;
  for (int q = 0; q < size_; ++q) {
    if (peerFailed_[static_cast<size_t>(q)].load(std::memory_order_acquire)) out.push_back(q);
  }
  return out;
}

void PeerTransport::interrupt() noexcept {
  interrupted_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] auto ignored = ::write(wake_.get(), &one, sizeof(one));
}

void PeerTransport::sendAbortFrames(const Error& cause) noexcept {
  if (abortSent_) return;
  abortSent_ = true;
  if (shmSelf_) shmSelf_.header().abortedAt.store(op_.current.seq + 1, std::memory_order_release);
  std::string text(4, '\0');
  uint32_t code = static_cast<uint32_t>(cause.code());
  std::memcpy(text.data(), &code, 4);
  text += std::string(cause.what()).substr(0, kMaxAbortMessage - 8);
  FrameHeader h;
  h.kind = FrameKind::kAbort;
  h.op = op_.current;
  h.bytes = text.size();
  uint8_t header[kFrameHeaderBytes];
  encodeFrame(h, header);
  for (auto& s : sockets_) {
    if (s) s->sendAbort(header, text);
  }
}

void PeerTransport::abort(const Error& cause) noexcept {
  if (op_.broken) return;
  op_.broken = true;
  sendAbortFrames(cause);
  for (auto& r : rings_) {
    if (r) r->clear();
  }
  for (auto& s : sockets_) {
    if (s) s->shutDown();
  }
}

void PeerTransport::close() noexcept {
  if (!op_.broken) {
    FrameHeader h;
    h.kind = FrameKind::kBye;
    h.op = op_.current;
    uint8_t header[kFrameHeaderBytes];
    encodeFrame(h, header);
    for (auto& s : sockets_) {
      if (s) s->sayGoodbye(header);
    }
    op_.broken = true;
  }
  for (auto& s : sockets_) {
    if (s) s->drainAndClose();
  }
  listener_.reset();
}

}  // namespace chorus::transport
