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
#include <array>
#include <cerrno>
#include <cstring>
#include <span>
#include <vector>

namespace chorus::transport::tcp {

TcpLink::TcpLink(int peer, Fd fd, std::string address, OpState& op, int epollFd,
                 ZeroCopySettings zeroCopy, std::unique_ptr<SealedStream> sealed)
    : peer_(peer),
      fd_(std::move(fd)),
      address_(std::move(address)),
      op_(op),
      epoll_(epollFd),
      sealed_(std::move(sealed)) {
  setNonBlocking(fd_.get());
  loopback_ = isLoopbackPeer(fd_.get());
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = static_cast<uint64_t>(peer_);
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd_.get(), &ev) < 0) {
    throw Error(ErrorCode::kSystem, "epoll_ctl: " + errnoText(errno));
  }
  events_ = ev.events;
  if (!sealed_) zeroCopy_.enable(fd_.get(), zeroCopy);
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
  headSealed_ = false;
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

void TcpLink::onWritable() {
  if (sealed_) {
    writeSealed();
    return;
  }
  writeBlocked_ = false;
  while (sendHead_) {
    Request& r = *sendHead_;
    // A zero-copy payload goes in calls of its own: the kernel would pin the header too, and
    // sendHeader_ is rewritten for the next send long before the kernel lets go of it.
    const bool zeroCopy = r.moved < r.bytes && zeroCopy_.wants(r.bytes);
    if (!zeroCopy) {
      if (!writeGathered()) break;
      continue;
    }
    iovec iov[2];
    int n = 0;
    int flags = MSG_NOSIGNAL | MSG_DONTWAIT;
    if (headerSent_ < kFrameHeaderBytes) {
      iov[n++] = {sendHeader_ + headerSent_, kFrameHeaderBytes - headerSent_};
      flags |= MSG_MORE;  // the payload follows at once
    } else {
      iov[n++] = {r.data + r.moved, r.bytes - r.moved};
      flags |= MSG_ZEROCOPY;
    }
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(n);
    ssize_t k = ::sendmsg(fd_.get(), &m, flags);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        writeBlocked_ = true;
        break;
      }
      if (errno == ENOBUFS && (flags & MSG_ZEROCOPY)) {
        // No room to pin more pages now: copy this much instead.
        zeroCopy_.refusedOnce();
        k = ::sendmsg(fd_.get(), &m, flags & ~MSG_ZEROCOPY);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          writeBlocked_ = true;
          break;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) lost(errnoText(errno));
      } else {
        lost(errnoText(errno));
      }
    } else if (flags & MSG_ZEROCOPY) {
      headZeroCopied_ = true;
      headLastZeroCopy_ = zeroCopy_.sent();
    }
    size_t sent = static_cast<size_t>(k);
    size_t h = std::min(sent, kFrameHeaderBytes - headerSent_);
    headerSent_ += h;
    r.moved += sent - h;
    frameLeft_ = (kFrameHeaderBytes - headerSent_) + (r.bytes - r.moved);
    if (frameLeft_ == 0) finishSend(r);
  }
  updateEvents();
}

bool TcpLink::writeGathered() {
  // The head's rest and the frames queued behind it, in one call: the kernel takes what fits.
  // Fewer calls per byte, and each call's push of a partly filled packet happens once.
  iovec iov[2 * kGatherFrames];
  int n = 0;
  size_t total = 0;
  auto add = [&](const uint8_t* p, size_t len) {
    if (len == 0) return;
    iov[n++] = {const_cast<uint8_t*>(p), len};
    total += len;
  };
  add(sendHeader_ + headerSent_, kFrameHeaderBytes - headerSent_);
  add(sendHead_->data + sendHead_->moved, sendHead_->bytes - sendHead_->moved);
  int frames = 1;
  for (Request* q = sendHead_->next; q && frames < kGatherFrames && !zeroCopy_.wants(q->bytes);
       q = q->next, ++frames) {
    // finishSend encodes the same header again when q becomes the head.
    uint8_t* header = gatherHeaders_[frames];
    encodeHeader(*q, header);
    add(header, kFrameHeaderBytes);
    add(q->data, q->bytes);
  }
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = static_cast<size_t>(n);
  ssize_t k;
  do {
    k = ::sendmsg(fd_.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (k < 0 && errno == EINTR);
  if (k < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK) lost(errnoText(errno));
    writeBlocked_ = true;
    return false;
  }
  size_t sent = static_cast<size_t>(k);
  for (;;) {
    Request& r = *sendHead_;
    const size_t h = std::min(sent, kFrameHeaderBytes - headerSent_);
    headerSent_ += h;
    sent -= h;
    const size_t p = std::min(sent, r.bytes - r.moved);
    r.moved += p;
    sent -= p;
    frameLeft_ = (kFrameHeaderBytes - headerSent_) + (r.bytes - r.moved);
    if (frameLeft_ > 0) break;
    finishSend(r);
    if (sent == 0 || !sendHead_) break;
  }
  // A short write means the socket buffer is full: epoll says when it has room again (trying
  // now would cost a call for EAGAIN).
  if (static_cast<size_t>(k) < total) {
    writeBlocked_ = true;
    return false;
  }
  return true;
}

void TcpLink::finishSend(Request& r) {
  popRequest(sendHead_, sendTail_);
  if (headZeroCopied_) {
    headZeroCopied_ = false;
    zeroCopy_.hold(&r, headLastZeroCopy_);  // done once the kernel lets go of its pages
  } else {
    r.state = Request::State::kDone;
    op_.sent(peer_, r.bytes);
  }
  if (sendHead_) encodeSendHeader();
}

void TcpLink::reapZeroCopy() {
  const bool ok = zeroCopy_.reap(fd_.get(), [&](Request& r) {
    r.state = Request::State::kDone;
    op_.sent(peer_, r.bytes);
  });
  if (!ok) lost("unexpected entry in the socket's error queue");
}

bool TcpLink::readSome(uint8_t* dst, size_t want, size_t& got, bool& drained) {
  if (sealed_) return readSealed(dst, want, got);
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
  // Control frames are never interleaved with data on this socket, so a frame is only cut short
  // by a full socket buffer; finish it (a sleeping peer drains the socket as soon as it wakes).
  if (sealed_) {
    sendControl(header, "");
    return;
  }
  sendAll(fd_.get(), header, kFrameHeaderBytes, Deadline::after(std::chrono::seconds(1)));
}

void TcpLink::writeSealed() {
  writeBlocked_ = false;
  for (;;) {
    if (sealed_->hasOutput()) {
      SealedStream::Step step = sealed_->flush(fd_.get());
      if (step == SealedStream::Step::kWouldBlock) {
        writeBlocked_ = true;
        break;
      }
      if (step != SealedStream::Step::kMoved) lost(std::string(sealed_->why()));
    }
    if (headSealed_) {
      Request& r = *sendHead_;
      headSealed_ = false;
      popRequest(sendHead_, sendTail_);
      r.state = Request::State::kDone;
      op_.sent(peer_, r.bytes);
      if (sendHead_) encodeSendHeader();
    }
    if (!sendHead_) break;
    // The next record: what is left of the head's header and as much payload as fits. A record
    // never spans two frames, so a send is done as soon as its last record is written.
    Request& r = *sendHead_;
    const size_t header = kFrameHeaderBytes - headerSent_;
    const size_t payload = std::min(r.bytes - r.moved, auth::kMaxRecordPlain - header);
    const std::array<std::span<const uint8_t>, 2> parts = {
        std::span<const uint8_t>(sendHeader_ + headerSent_, header),
        std::span<const uint8_t>(r.data + r.moved, payload)};
    sealed_->seal(parts);
    headerSent_ = kFrameHeaderBytes;
    r.moved += payload;
    frameLeft_ = r.bytes - r.moved;
    headSealed_ = frameLeft_ == 0;
  }
  updateEvents();
}

bool TcpLink::readSealed(uint8_t* dst, size_t want, size_t& got) {
  switch (sealed_->read(fd_.get(), dst, want, got)) {
    case SealedStream::Step::kMoved:
      return true;
    case SealedStream::Step::kWouldBlock:
      return false;
    case SealedStream::Step::kClosed:
      onEof();  // throws unless the peer said goodbye
      return false;
    case SealedStream::Step::kFailed:
      break;
  }
  lost(std::string(sealed_->why()));
}

}  // namespace chorus::transport::tcp
