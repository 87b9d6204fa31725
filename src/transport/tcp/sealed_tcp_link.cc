// The encrypted link's writes and reads: records sealed from the send queue, opened into the
// receives, and control frames sealed whole.
#include "transport/tcp/sealed_tcp_link.h"

#include "transport/request_queue.h"

#include <algorithm>
#include <array>
#include <span>
#include <vector>

namespace chorus::transport::tcp {

SealedTcpLink::SealedTcpLink(int peer, Fd fd, std::string address, OpState& op, int epollFd,
                             std::unique_ptr<SealedStream> sealed)
    : TcpLink(peer, std::move(fd), std::move(address), op, epollFd, ZeroCopySettings{}),
      sealed_(std::move(sealed)) {}

void SealedTcpLink::clear() noexcept {
  headSealed_ = false;
  TcpLink::clear();
}

void SealedTcpLink::onWritable() {
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

bool SealedTcpLink::readSealed(uint8_t* dst, size_t want, size_t& got) {
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

bool SealedTcpLink::readSome(uint8_t* dst, size_t want, size_t& got, bool&) {
  return readSealed(dst, want, got);
}

void SealedTcpLink::writeAbort(const uint8_t* header, const std::string& text) noexcept {
  sendControl(header, text);
}

bool SealedTcpLink::writeGoodbye(const uint8_t* header) noexcept { return sendControl(header, ""); }

void SealedTcpLink::writeWake(const uint8_t* header) noexcept { sendControl(header, ""); }

bool SealedTcpLink::padFrame() noexcept {
  static const uint8_t zeros[kPadChunk] = {};
  // What is left of the frame was never sealed: seal zeros in its place.
  Deadline deadline = Deadline::after(std::chrono::milliseconds(2000));
  if (!sealed_->flushAll(fd_.get(), deadline)) return false;
  while (frameLeft_ > 0) {
    const size_t n = std::min(frameLeft_, sizeof(zeros));
    if (!sealed_->sendAll(fd_.get(), std::span<const uint8_t>(zeros, n), deadline)) return false;
    frameLeft_ -= n;
  }
  return true;
}

bool SealedTcpLink::sendControl(const uint8_t* header, const std::string& text) noexcept {
  try {
    std::vector<uint8_t> frame(header, header + kFrameHeaderBytes);
    frame.insert(frame.end(), text.begin(), text.end());
    return sealed_->sendAll(fd_.get(), frame, Deadline::after(std::chrono::seconds(1)));
  } catch (...) {
    return false;
  }
}

}  // namespace chorus::transport::tcp
