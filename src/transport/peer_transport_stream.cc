// The TCP byte stream of one peer: frames out, frames in, and their checks.
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
void PeerTransport::encodeSendHeader(Link& l) {
  FrameHeader h;
  h.kind = FrameKind::kData;
  h.op = current_;
  h.step = l.sendHead->step;
  h.bytes = l.sendHead->bytes;
  encodeFrame(h, l.sendHeader);
  l.headerSent = 0;
}

void PeerTransport::updateEvents(Link& l) {
  if (!l.fd || l.in == Inbound::kGone) return;
  uint32_t want = 0;
  if (!(l.parked && !l.recvHead && l.muted)) want |= EPOLLIN;
  if (l.writeBlocked && l.sendHead) want |= EPOLLOUT;
  if (!l.halfClosed) want |= EPOLLRDHUP;
  if (want == l.events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = static_cast<uint64_t>(l.peer);
  epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, l.fd.get(), &ev);
  l.events = want;
}

void PeerTransport::onWritable(Link& l) {
  l.writeBlocked = false;
  while (l.sendHead) {
    Request& r = *l.sendHead;
    iovec iov[2];
    int n = 0;
    if (l.headerSent < kFrameHeaderBytes) {
      iov[n++] = {l.sendHeader + l.headerSent, kFrameHeaderBytes - l.headerSent};
    }
    if (r.moved < r.bytes) iov[n++] = {r.data + r.moved, r.bytes - r.moved};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(n);
    ssize_t k = ::sendmsg(l.fd.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        l.writeBlocked = true;
        break;
      }
      lost(l, errnoText(errno));
    }
    size_t sent = static_cast<size_t>(k);
    size_t h = std::min(sent, kFrameHeaderBytes - l.headerSent);
    l.headerSent += h;
    r.moved += sent - h;
    l.frameLeft = (kFrameHeaderBytes - l.headerSent) + (r.bytes - r.moved);
    if (l.frameLeft == 0) {
      popRequest(l.sendHead, l.sendTail);
      r.state = Request::State::kDone;
      if (l.sendHead) encodeSendHeader(l);
    }
  }
  updateEvents(l);
}

bool PeerTransport::readSome(Link& l, uint8_t* dst, size_t want, size_t& got) {
  for (;;) {
    if (l.stageAt < l.stageEnd) {
      size_t k = std::min(l.stageEnd - l.stageAt, want - got);
      std::memcpy(dst + got, l.stage + l.stageAt, k);
      l.stageAt += k;
      got += k;
      return true;
    }
    const bool staged = want - got < kStageBytes;
    ssize_t k = staged ? ::recv(l.fd.get(), l.stage, kStageBytes, MSG_DONTWAIT)
                       : ::recv(l.fd.get(), dst + got, want - got, MSG_DONTWAIT);
    if (k > 0 && staged) {
      l.stageAt = 0;
      l.stageEnd = static_cast<size_t>(k);
      continue;
    }
    if (k > 0) {
      got += static_cast<size_t>(k);
      return true;
    }
    if (k == 0) {
      onEof(l);  // throws unless the peer said goodbye
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
    lost(l, errnoText(errno));
  }
}

void PeerTransport::onReadable(Link& l) {
  while (l.in != Inbound::kGone) {
    if (l.in == Inbound::kHeader) {
      if (l.parked) {
        if (!l.recvHead) break;
        startPayload(l);
        continue;
      }
      if (!readSome(l, l.recvHeader, kFrameHeaderBytes, l.headerGot)) break;
      if (l.headerGot < kFrameHeaderBytes) continue;
      l.headerGot = 0;
      std::string why;
      auto h = decodeFrame(l.recvHeader, &why);
      if (!h) lost(l, "protocol violation: " + why);
      onHeader(l, *h);
    } else if (l.in == Inbound::kPayload) {
      Request& r = *l.recvHead;
      if (r.moved < r.bytes) {
        if (!readSome(l, r.data, r.bytes, r.moved)) break;  // nothing more now, or peer gone
        if (r.moved < r.bytes) continue;
      }
      popRequest(l.recvHead, l.recvTail);
      r.state = Request::State::kDone;
      l.in = Inbound::kHeader;
      l.parked = false;
      l.muted = false;
      // Nothing more awaited here: leave the socket to epoll rather than probe it (EAGAIN).
      if (!l.recvHead && l.stageAt == l.stageEnd) break;
    } else {  // Inbound::kAbortText
      auto* text = reinterpret_cast<uint8_t*>(l.abortText.data());
      if (!readSome(l, text, l.abortText.size(), l.abortGot)) break;
      if (l.abortGot == l.abortText.size()) onAbortText(l);
    }
  }
  updateEvents(l);
}

void PeerTransport::onAbortText(Link& l) {
  uint32_t code;
  std::memcpy(&code, l.abortText.data(), 4);
  if (code == 0 || code > static_cast<uint32_t>(ErrorCode::kInternal)) {
    code = static_cast<uint32_t>(ErrorCode::kPeerFailure);
  }
  l.in = Inbound::kHeader;
  Error remote(static_cast<ErrorCode>(code),
               "rank " + std::to_string(l.peer) + " failed: " + l.abortText.substr(4));
  if (inOp_ && l.abortSeq > current_.seq) {
    l.abortedLater = true;
    if (!deferred_) deferred_ = std::make_unique<Error>(remote);
    return;
  }
  abortFrom_ = l.peer;
  l.abortRead = true;
  throw remote;
}

void PeerTransport::onHeader(Link& l, const FrameHeader& h) {
  switch (h.kind) {
    case FrameKind::kData:
      l.parked = true;
      l.parkedHeader = h;
      checkParked(l);
      return;
    case FrameKind::kAbort:
      l.abortSeq = h.op.seq;
      l.in = Inbound::kAbortText;
      l.abortText.assign(h.bytes, '\0');
      l.abortGot = 0;
      return;
    case FrameKind::kBye:
      l.sawBye = true;
      return;
    case FrameKind::kWake:
      return;  // waking up was the point
  }
}

// A frame that arrived for the collective this rank is running must describe the same call.
void PeerTransport::checkParked(Link& l) {
  const OpDesc& theirs = l.parkedHeader.op;
  if (!inOp_ || theirs.seq > current_.seq) return;  // the peer is ahead: checked at beginOp
  if (theirs.sameCall(current_)) return;
  // A frame for a call this rank has already finished: compare with what it called then.
  const OpDesc& mine =
      theirs.seq < current_.seq && history_[theirs.seq % history_.size()].seq == theirs.seq
          ? history_[theirs.seq % history_.size()]
          : current_;
  if (auto mismatch = findMismatch(l.peer, l.parkedHeader, mine, nullptr)) throw *mismatch;
}

void PeerTransport::startPayload(Link& l) {
  checkParked(l);
  const FrameHeader& h = l.parkedHeader;
  Request& r = *l.recvHead;
  if (auto mismatch = findMismatch(l.peer, h, current_, &r)) throw *mismatch;
  l.in = Inbound::kPayload;
}

void PeerTransport::onEof(Link& l) {
  if (!l.sawBye && !l.abortedLater) lost(l, "connection closed by peer");
  l.in = Inbound::kGone;
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, l.fd.get(), nullptr);
  if (l.recvHead || l.sendHead) gone(l);
}

}  // namespace chorus::transport
