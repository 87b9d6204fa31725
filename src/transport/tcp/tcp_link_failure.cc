// A TCP link's ways out: abort and goodbye frames, a peer that closed or vanished, and what is
// salvaged from it (the peer's own account of its failure) before the link is given up.
#include "transport/tcp/tcp_link.h"

#include "common/errno_text.h"
#include "common/socket_io.h"
#include "transport/mismatch.h"
#include "transport/request_queue.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace chorus::transport::tcp {

void TcpLink::sendAbort(const uint8_t* header, const std::string& text) noexcept {
  if (!fd_ || in_ == Inbound::kGone) return;
  // A frame half written must be completed before the abort can follow it; its requests may
  // be gone already, so the rest is sent as zeros (the peer discards it when it reads why).
  if (frameLeft_ > 0 && !padFrame()) return;
  writeAbort(header, text);
}

void TcpLink::shutDown() noexcept {
  if (!fd_) return;
  clear();
  // Half-close now so the peer sees the abort; the socket itself closes with the transport.
  ::shutdown(fd_.get(), SHUT_WR);
}

void TcpLink::sayGoodbye(const uint8_t* header) noexcept {
  if (!fd_ || in_ == Inbound::kGone || sendHead_) return;
  if (writeGoodbye(header)) ::shutdown(fd_.get(), SHUT_WR);
}

void TcpLink::onEof() {
  if (!sawBye_ && !abortedLater_) lost("connection closed by peer");
  // Zero-copy sends the peer has read are done once their completions are reaped from the error
  // queue, where they wait by now. The EOF can be read in the same round as the EPOLLERR that
  // announces them: reap them before the socket leaves epoll, or their waits never end.
  if (zeroCopy_.armed()) reapZeroCopy();
  in_ = Inbound::kGone;
  epoll_ctl(epoll_, EPOLL_CTL_DEL, fd_.get(), nullptr);
  if (recvHead_ || sendHead_ || zeroCopy_.holding()) gone();
}

void TcpLink::gone() {
  if (abortedLater_ && op_.deferred) throw *op_.deferred;
  throw Error(ErrorCode::kPeerFailure,
              "rank " + std::to_string(peer_) + " (" + address_ +
                  ") closed its communicator or exited while this rank still exchanges data "
                  "with it; it may have failed (see its own output)");
}

void TcpLink::salvageAbort() noexcept {
  // Skip whatever data is queued and look for the peer's abort message behind it; give up at
  // the first sign of trouble (this is only for a better message).
  if (!salvageable()) return;
  try {
    recvHead_ = recvTail_ = nullptr;
    size_t budget = 64u << 20;
    uint8_t sink[16384];
    for (int spins = 0; spins < 1000 && in_ != Inbound::kGone; ++spins) {
      if (in_ == Inbound::kHeader && parked_) {
        uint64_t left = parkedHeader_.bytes;
        uint64_t fromStage = std::min<uint64_t>(left, stageEnd_ - stageAt_);
        stageAt_ += fromStage;
        left -= fromStage;
        while (left > 0 && budget > 0) {
          size_t k = 0;
          if (!discard(sink, std::min<uint64_t>(left, sizeof(sink)), k)) return;
          left -= k;
          budget -= std::min(budget, k);
        }
        if (left > 0) return;
        parked_ = false;
        continue;
      }
      if (in_ == Inbound::kPayload) return;
      ssize_t k = ::recv(fd_.get(), abortText_.data(), 0, MSG_DONTWAIT | MSG_PEEK);
      if (k < 0 && !buffered()) return;
      onReadable();  // throws the remote abort once its text is complete
      if (in_ == Inbound::kHeader && !parked_) return;
    }
  } catch (const Error& e) {
    salvaged_ = std::make_unique<Error>(e);
  } catch (...) {
  }
}

bool TcpLink::discard(uint8_t* sink, size_t want, size_t& k) {
  ssize_t n = ::recv(fd_.get(), sink, want, MSG_DONTWAIT);
  if (n <= 0) return false;
  k = static_cast<size_t>(n);
  return true;
}

void TcpLink::lost(const std::string& why) {
  if (abortedLater_ && op_.deferred) throw *op_.deferred;
  if (!salvaging_) {
    salvaging_ = true;
    salvageAbort();
    salvaging_ = false;
    if (salvaged_) {
      Error e = *salvaged_;
      salvaged_.reset();
      // The peer's own account (its abort message, or its goodbye) says more than the loss.
      if (abortRead_ || sawBye_) throw e;
    }
  }
  throw Error(ErrorCode::kPeerFailure,
              "lost connection to rank " + std::to_string(peer_) + " (" + address_ + "): " + why);
}

bool TcpLink::padFrame() noexcept {
  static const uint8_t zeros[kPadChunk] = {};
  Deadline deadline = Deadline::after(std::chrono::milliseconds(2000));
  while (frameLeft_ > 0) {
    ssize_t k =
        ::send(fd_.get(), zeros, std::min(frameLeft_, sizeof(zeros)), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      frameLeft_ -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EINTR) return false;
    pollfd p{fd_.get(), POLLOUT, 0};
    if (deadline.expired() || ::poll(&p, 1, deadline.remainingMs(100)) < 0) return false;
  }
  return true;
}

void TcpLink::drainAndClose() noexcept {
  if (!fd_) return;
  // Unread bytes at close() make the kernel reset the connection and drop data we still owe the
  // peer, so read what is there first.
  char sink[4096];
  while (::recv(fd_.get(), sink, sizeof(sink), MSG_DONTWAIT) > 0) {
  }
  fd_.reset();
}

void TcpLink::throwPeerAbort() {
  // The reason follows on the TCP connection; read it (it throws), waiting a little for it.
  Deadline deadline = Deadline::after(std::chrono::seconds(1));
  while (!deadline.expired() && in_ != Inbound::kGone) {
    onReadable();
    pollfd p{fd_.get(), POLLIN, 0};
    ::poll(&p, 1, deadline.remainingMs(100));
  }
  op_.abortFrom = peer_;
  throw Error(ErrorCode::kPeerFailure,
              "rank " + std::to_string(peer_) + " (" + address_ + ") aborted its communicator");
}

}  // namespace chorus::transport::tcp
