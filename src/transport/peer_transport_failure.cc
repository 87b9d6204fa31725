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
void PeerTransport::gone(Link& l) {
  if (l.abortedLater && deferred_) throw *deferred_;
  throw Error(ErrorCode::kPeerFailure,
              "rank " + std::to_string(l.peer) + " (" + l.address +
                  ") closed its communicator while this rank still exchanges data with it "
                  "(did the ranks run different numbers of collectives?)");
}

void PeerTransport::salvageAbort(Link& l) noexcept {
  // Skip whatever data is queued and look for the peer's abort message behind it; give up at
  // the first sign of trouble (this is only for a better message).
  try {
    l.recvHead = l.recvTail = nullptr;
    size_t budget = 64u << 20;
    uint8_t sink[16384];
    for (int spins = 0; spins < 1000 && l.in != Inbound::kGone; ++spins) {
      if (l.in == Inbound::kHeader && l.parked) {
        uint64_t left = l.parkedHeader.bytes;
        uint64_t fromStage = std::min<uint64_t>(left, l.stageEnd - l.stageAt);
        l.stageAt += fromStage;
        left -= fromStage;
        while (left > 0 && budget > 0) {
          ssize_t k =
              ::recv(l.fd.get(), sink, std::min<uint64_t>(left, sizeof(sink)), MSG_DONTWAIT);
          if (k <= 0) return;
          left -= static_cast<uint64_t>(k);
          budget -= std::min(budget, static_cast<size_t>(k));
        }
        if (left > 0) return;
        l.parked = false;
        continue;
      }
      if (l.in == Inbound::kPayload) return;
      ssize_t k = ::recv(l.fd.get(), l.abortText.data(), 0, MSG_DONTWAIT | MSG_PEEK);
      if (k < 0 && l.stageAt == l.stageEnd) return;
      onReadable(l);  // throws the remote abort once its text is complete
      if (l.in == Inbound::kHeader && !l.parked) return;
    }
  } catch (const Error& e) {
    salvaged_ = std::make_unique<Error>(e);
  } catch (...) {
  }
}

void PeerTransport::lost(Link& l, const std::string& why) {
  if (l.abortedLater && deferred_) throw *deferred_;
  if (!salvaging_) {
    salvaging_ = true;
    salvageAbort(l);
    salvaging_ = false;
    if (salvaged_) {
      Error e = *salvaged_;
      salvaged_.reset();
      // The peer's own account (its abort message, or its goodbye) says more than the loss.
      if (l.abortRead || l.sawBye) throw e;
    }
  }
  throw Error(ErrorCode::kPeerFailure,
              "lost connection to rank " + std::to_string(l.peer) + " (" + l.address + "): " + why);
}

void PeerTransport::interrupt() noexcept {
  interrupted_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] auto ignored = ::write(wake_.get(), &one, sizeof(one));
}

void PeerTransport::sendAbortFrames(const Error& cause) noexcept {
  if (abortSent_) return;
  abortSent_ = true;
  if (shmSelf_) shmSelf_.header().abortedAt.store(current_.seq + 1, std::memory_order_release);
  std::string text(4, '\0');
  uint32_t code = static_cast<uint32_t>(cause.code());
  std::memcpy(text.data(), &code, 4);
  text += std::string(cause.what()).substr(0, kMaxAbortMessage - 8);
  FrameHeader h;
  h.kind = FrameKind::kAbort;
  h.op = current_;
  h.bytes = text.size();
  uint8_t header[kFrameHeaderBytes];
  encodeFrame(h, header);
  for (auto& l : links_) {
    if (!l.fd || l.in == Inbound::kGone) continue;
    // A frame half written must be completed before the abort can follow it; its requests may
    // be gone already, so the rest is sent as zeros (the peer discards it when it reads why).
    if (l.frameLeft > 0 && !padFrame(l)) continue;
    iovec iov[2] = {{header, kFrameHeaderBytes}, {text.data(), text.size()}};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = 2;
    [[maybe_unused]] auto ignored = ::sendmsg(l.fd.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

bool PeerTransport::padFrame(Link& l) noexcept {
  static const uint8_t zeros[65536] = {};
  Deadline deadline = Deadline::after(std::chrono::milliseconds(2000));
  while (l.frameLeft > 0) {
    ssize_t k = ::send(l.fd.get(), zeros, std::min(l.frameLeft, sizeof(zeros)),
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      l.frameLeft -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EINTR) return false;
    pollfd p{l.fd.get(), POLLOUT, 0};
    if (deadline.expired() || ::poll(&p, 1, deadline.remainingMs(100)) < 0) return false;
  }
  return true;
}

void PeerTransport::abort(const Error& cause) noexcept {
  if (broken_) return;
  broken_ = true;
  sendAbortFrames(cause);
  for (auto& l : links_) {
    if (!l.fd) continue;
    l.sendHead = l.sendTail = nullptr;
    l.recvHead = l.recvTail = nullptr;
    if (l.shm) l.shm->clear();
    // Half-close now so peers see the abort; the socket itself closes with the transport.
    ::shutdown(l.fd.get(), SHUT_WR);
  }
}

void PeerTransport::drainAndClose(Link& l) noexcept {
  // Unread bytes at close() make the kernel reset the connection and drop data we still owe the
  // peer, so read what is there first.
  char sink[4096];
  while (::recv(l.fd.get(), sink, sizeof(sink), MSG_DONTWAIT) > 0) {
  }
  l.fd.reset();
}

void PeerTransport::close() noexcept {
  if (!broken_) {
    FrameHeader h;
    h.kind = FrameKind::kBye;
    h.op = current_;
    uint8_t header[kFrameHeaderBytes];
    encodeFrame(h, header);
    for (auto& l : links_) {
      if (!l.fd || l.in == Inbound::kGone || l.sendHead) continue;
      [[maybe_unused]] auto ignored =
          ::send(l.fd.get(), header, kFrameHeaderBytes, MSG_NOSIGNAL | MSG_DONTWAIT);
      ::shutdown(l.fd.get(), SHUT_WR);
    }
    broken_ = true;
  }
  for (auto& l : links_) {
    if (l.fd) drainAndClose(l);
  }
  listener_.reset();
}

}  // namespace chorus::transport
