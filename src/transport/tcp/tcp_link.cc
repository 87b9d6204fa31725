#include "transport/tcp/tcp_link.h"

#include "common/errno_text.h"
#include "common/socket_io.h"
#include "transport/mismatch.h"
#include "transport/request_queue.h"
#include "transport/tcp/endpoint.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace chorus::transport::tcp {

TcpLink::TcpLink(int peer, Fd fd, std::string address, OpState& op, int epollFd,
                 ZeroCopySettings zeroCopy)
    : peer_(peer), fd_(std::move(fd)), address_(std::move(address)), op_(op), epoll_(epollFd) {
  setNonBlocking(fd_.get());
  loopback_ = isLoopbackPeer(fd_.get());
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = static_cast<uint64_t>(peer_);
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd_.get(), &ev) < 0) {
    throw Error(ErrorCode::kSystem, "epoll_ctl: " + errnoText(errno));
  }
  events_ = ev.events;
  zeroCopy_.enable(fd_.get(), zeroCopy);
}

void TcpLink::postSend(Request& r) {
  if (in_ == Inbound::kGone) gone();
  pushRequest(sendHead_, sendTail_, &r);
  if (sendHead_ == &r) {
    encodeSendHeader();
    onWritable();  // write at once: the common case needs no epoll round
  }
}

void TcpLink::postRecv(Request& r) {
  pushRequest(recvHead_, recvTail_, &r);
  if (recvHead_ == &r) {
    if (in_ == Inbound::kGone) gone();
    // What already arrived is taken now; the socket itself is left to the wait's epoll round
    // (probing it here mostly costs an EAGAIN).
    if (parked_ || buffered()) onReadable();  // also turns EPOLLIN back on
  }
}

bool TcpLink::holdsSend(const Request* r) const {
  for (const Request* q = sendHead_; q; q = q->next) {
    if (q == r) return true;
  }
  return zeroCopy_.holds(r);
}

void TcpLink::clear() noexcept {
  sendHead_ = sendTail_ = nullptr;
  headZeroCopied_ = false;
  zeroCopy_.forget();
  recvHead_ = recvTail_ = nullptr;
}

void TcpLink::onBeginOp() {
  if (fd_ && parked_) checkParked();
}

void TcpLink::onEvents(uint32_t ev) {
  if (!fd_ || in_ == Inbound::kGone) return;
  // Reads first: an abort message from the peer explains a failing write better than EPIPE.
  if ((ev & EPOLLIN) && parked_ && !recvHead_) muted_ = true;  // more behind a parked frame
  if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) onReadable();
  if (ev & EPOLLOUT) onWritable();
  if ((ev & (EPOLLERR | EPOLLHUP)) && in_ != Inbound::kGone) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    // Zero-copy notifications wait in the error queue and raise EPOLLERR without any error.
    if (err == 0 && !(ev & EPOLLHUP) && zeroCopy_.armed()) {
      reapZeroCopy();
      return;
    }
    if (sawBye_) {
      onEof();
    } else {
      lost(err ? errnoText(err) : "connection closed by peer");
    }
  }
  if ((ev & EPOLLRDHUP) && !(events_ & EPOLLIN)) {
    // The peer finished sending; what it sent is still queued behind a parked frame.
    halfClosed_ = true;
    updateEvents();
  }
}

void TcpLink::encodeHeader(const Request& r, uint8_t* out) const {
  FrameHeader h;
  h.kind = FrameKind::kData;
  h.op = op_.current;
  h.step = r.step;
  h.bytes = r.bytes;
  encodeFrame(h, out);
}

void TcpLink::encodeSendHeader() {
  encodeHeader(*sendHead_, sendHeader_);
  headerSent_ = 0;
}

void TcpLink::updateEvents() {
  if (!fd_ || in_ == Inbound::kGone) return;
  uint32_t want = 0;
  if (!(parked_ && !recvHead_ && muted_)) want |= EPOLLIN;
  if (writeBlocked_ && sendHead_) want |= EPOLLOUT;
  if (!halfClosed_) want |= EPOLLRDHUP;
  if (want == events_) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = static_cast<uint64_t>(peer_);
  epoll_ctl(epoll_, EPOLL_CTL_MOD, fd_.get(), &ev);
  events_ = want;
}

bool TcpLink::readSome(uint8_t* dst, size_t want, size_t& got, bool& drained) {
  for (;;) {
    if (stageAt_ < stageEnd_) {
      size_t k = std::min(stageEnd_ - stageAt_, want - got);
      std::memcpy(dst + got, stage_ + stageAt_, k);
      stageAt_ += k;
      got += k;
      return true;
    }
    // The last recv came back short: the socket is empty, and epoll (level-triggered) says when
    // it is not. Another recv now would mostly cost a system call for EAGAIN.
    if (drained) return false;
    const bool staged = want - got < kStageBytes;
    // A large read also takes what follows the payload into the stage (the next frame's header,
    // mostly): one system call per frame instead of two while data streams in. Every recv that
    // frees much of the receive buffer may send a window update through the whole network path,
    // which costs more than the call itself. Over loopback neither holds: more data is there
    // again by the next call and an update costs little, so it reads on after a short read and
    // into the payload only (measured: 13% less CPU per byte and 15% more busbw at 64 MiB,
    // docs/performance-log.md, "CPU cost per byte").
    const bool readAhead = !staged && !loopback_;
    iovec iov[2] = {{dst + got, want - got}, {stage_, kStageBytes}};
    msghdr m{};
    m.msg_iov = staged ? iov + 1 : iov;
    m.msg_iovlen = readAhead ? 2 : 1;
    const size_t asked = staged ? kStageBytes : want - got + (readAhead ? kStageBytes : 0);
    ssize_t k = ::recvmsg(fd_.get(), &m, MSG_DONTWAIT);
    if (k > 0) {
      const auto n = static_cast<size_t>(k);
      drained = n < asked && !loopback_;
      const size_t direct = staged ? 0 : std::min(n, want - got);
      got += direct;
      stageAt_ = 0;
      stageEnd_ = n - direct;
      if (direct > 0) return true;
      continue;
    }
    if (k == 0) {
      onEof();  // throws unless the peer said goodbye
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      drained = true;
      return false;
    }
    lost(errnoText(errno));
  }
}

void TcpLink::onReadable() {
  bool drained = false;  // a recv of this round came back short
  while (in_ != Inbound::kGone) {
    if (in_ == Inbound::kHeader) {
      if (parked_) {
        if (!recvHead_) break;
        startPayload();
        continue;
      }
      if (!readSome(recvHeader_, kFrameHeaderBytes, headerGot_, drained)) break;
      if (headerGot_ < kFrameHeaderBytes) continue;
      headerGot_ = 0;
      std::string why;
      auto h = decodeFrame(recvHeader_, &why);
      if (!h) lost("protocol violation: " + why);
      onHeader(*h);
    } else if (in_ == Inbound::kPayload) {
      Request& r = *recvHead_;
      if (r.moved < r.bytes) {
        if (!readSome(r.data, r.bytes, r.moved, drained)) break;  // nothing more now, or peer gone
        if (r.moved < r.bytes) continue;
      }
      popRequest(recvHead_, recvTail_);
      r.state = Request::State::kDone;
      op_.received(peer_, r.bytes);
      in_ = Inbound::kHeader;
      parked_ = false;
      muted_ = false;
      // Nothing more awaited here: leave the socket to epoll rather than probe it (EAGAIN).
      if (!recvHead_ && !buffered()) break;
    } else {  // Inbound::kAbortText
      auto* text = reinterpret_cast<uint8_t*>(abortText_.data());
      if (!readSome(text, abortText_.size(), abortGot_, drained)) break;
      if (abortGot_ == abortText_.size()) onAbortText();
    }
  }
  updateEvents();
}

void TcpLink::onAbortText() {
  uint32_t code;
  std::memcpy(&code, abortText_.data(), 4);
  if (code == 0 || code > static_cast<uint32_t>(ErrorCode::kInternal)) {
    code = static_cast<uint32_t>(ErrorCode::kPeerFailure);
  }
  in_ = Inbound::kHeader;
  Error remote(static_cast<ErrorCode>(code),
               "rank " + std::to_string(peer_) + " failed: " + abortText_.substr(4));
  if (op_.inOp && abortSeq_ > op_.current.seq) {
    abortedLater_ = true;
    if (!op_.deferred) {
      op_.deferred = std::make_unique<Error>(remote);
      op_.deferredSeq = abortSeq_;
    }
    return;
  }
  op_.abortFrom = peer_;
  abortRead_ = true;
  throw remote;
}

void TcpLink::onHeader(const FrameHeader& h) {
  switch (h.kind) {
    case FrameKind::kData:
      parked_ = true;
      parkedHeader_ = h;
      checkParked();
      if (op_.inOp && h.op.seq == op_.current.seq) op_.arrived(peer_);
      return;
    case FrameKind::kAbort:
      abortSeq_ = h.op.seq;
      in_ = Inbound::kAbortText;
      abortText_.assign(h.bytes, '\0');
      abortGot_ = 0;
      return;
    case FrameKind::kBye:
      sawBye_ = true;
      return;
    case FrameKind::kWake:
      return;  // waking up was the point
  }
}

void TcpLink::checkParked() {
  const OpDesc& theirs = parkedHeader_.op;
  if (!op_.inOp || theirs.seq > op_.current.seq) return;  // the peer is ahead: checked at beginOp
  if (theirs.sameCall(op_.current)) return;
  // A frame for a call this rank has already finished: compare with what it called then.
  const OpDesc* earlier = theirs.seq < op_.current.seq ? op_.recent(theirs.seq) : nullptr;
  const OpDesc& mine = earlier != nullptr ? *earlier : op_.current;
  if (auto mismatch = findMismatch(peer_, parkedHeader_, mine, nullptr)) throw *mismatch;
}

void TcpLink::startPayload() {
  checkParked();
  const FrameHeader& h = parkedHeader_;
  Request& r = *recvHead_;
  if (auto mismatch = findMismatch(peer_, h, op_.current, &r)) throw *mismatch;
  op_.arrived(peer_);  // parked before this call began, if not counted at its header
  in_ = Inbound::kPayload;
}

void TcpLink::wakePeer() noexcept {
  if (!fd_ || in_ == Inbound::kGone || op_.broken) return;
  FrameHeader h;
  h.kind = FrameKind::kWake;
  h.op = op_.current;
  uint8_t header[kFrameHeaderBytes];
  encodeFrame(h, header);
  writeWake(header);
}

}  // namespace chorus::transport::tcp
