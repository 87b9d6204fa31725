// The plain TCP link's writes: the two data paths (gathered copies; MSG_ZEROCOPY for large
// payloads), the completion of the sends they write, and the control frames.
#include "transport/tcp/tcp_link.h"

#include "common/errno_text.h"
#include "common/socket_io.h"
#include "transport/request_queue.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

namespace chorus::transport::tcp {

void TcpLink::onWritable() {
  writeBlocked_ = false;
  while (sendHead_) {
    Request& r = *sendHead_;
    // A zero-copy payload goes in calls of its own: the kernel would pin the header too, and
    // sendHeader_ is rewritten for the next send long before the kernel lets go of it.
    const bool zeroCopy = r.moved < r.bytes && zeroCopy_.wants(r.bytes);
    if (!(zeroCopy ? writeZeroCopy(r) : writeGathered())) break;
  }
  updateEvents();
}

bool TcpLink::writeZeroCopy(Request& r) {
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
    if (errno == EINTR) return true;  // the caller's loop tries again
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      writeBlocked_ = true;
      return false;
    }
    if (errno == ENOBUFS && (flags & MSG_ZEROCOPY)) {
      // No room to pin more pages now: copy this much instead.
      zeroCopy_.refusedOnce();
      k = ::sendmsg(fd_.get(), &m, flags & ~MSG_ZEROCOPY);
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        writeBlocked_ = true;
        return false;
      }
      if (k < 0 && errno == EINTR) return true;
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
  return true;
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
  // Over loopback the peer drains the socket at memory speed: gathering frames saves no packet
  // work there, and a short write is mostly followed by room at once, so the link writes one
  // frame at a time and writes on after a short write (as it reads on after a short read;
  // measured: loopback busbw at 64 MiB 0.93x -> 0.96x the build before these write changes).
  const int gatherFrames = loopback_ ? 1 : kGatherFrames;
  for (Request* q = sendHead_->next; q && frames < gatherFrames && !zeroCopy_.wants(q->bytes);
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
  // now would cost a call for EAGAIN). Not over loopback (above).
  if (static_cast<size_t>(k) < total && !loopback_) {
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

void TcpLink::writeAbort(const uint8_t* header, const std::string& text) noexcept {
  iovec iov[2] = {{const_cast<uint8_t*>(header), kFrameHeaderBytes},
                  {const_cast<char*>(text.data()), text.size()}};
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = 2;
  [[maybe_unused]] auto ignored = ::sendmsg(fd_.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool TcpLink::writeGoodbye(const uint8_t* header) noexcept {
  [[maybe_unused]] auto ignored =
      ::send(fd_.get(), header, kFrameHeaderBytes, MSG_NOSIGNAL | MSG_DONTWAIT);
  return true;
}

void TcpLink::writeWake(const uint8_t* header) noexcept {
  // Control frames are never interleaved with data on this socket, so a frame is only cut short
  // by a full socket buffer; finish it (a sleeping peer drains the socket as soon as it wakes).
  sendAll(fd_.get(), header, kFrameHeaderBytes, Deadline::after(std::chrono::seconds(1)));
}

}  // namespace chorus::transport::tcp
