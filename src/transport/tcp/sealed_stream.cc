#include "transport/tcp/sealed_stream.h"

#include "common/errno_text.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace chorus::transport::tcp {
namespace {

constexpr size_t kRecordMax = auth::kMaxRecordPlain + auth::kRecordOverhead;
// Read-ahead: the socket is drained in large reads (as an unencrypted link reads straight into
// the destination), which keeps the receive window open; a partial record is moved to the front
// when the end is near.
constexpr size_t kInBytes = 4 * kRecordMax;

}  // namespace

SealedStream::SealedStream(const auth::StreamKeys& keys)
    : sealer_(keys.send, auth::RecordCipher::Direction::kSeal),
      opener_(keys.receive, auth::RecordCipher::Direction::kOpen),
      out_(new uint8_t[kRecordMax]),
      in_(new uint8_t[kInBytes]),
      plain_(new uint8_t[auth::kMaxRecordPlain]) {}

void SealedStream::seal(std::span<const std::span<const uint8_t>> parts) {
  size_t total = 0;
  for (auto p : parts) total += p.size();
  sealer_.seal(parts, out_.get());
  outAt_ = 0;
  outEnd_ = total + auth::kRecordOverhead;
}

SealedStream::Step SealedStream::flush(int fd) {
  while (outAt_ < outEnd_) {
    ssize_t k = ::send(fd, out_.get() + outAt_, outEnd_ - outAt_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      outAt_ += static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Step::kWouldBlock;
    return fail(k < 0 ? errnoText(errno) : "send wrote nothing");
  }
  outAt_ = outEnd_ = 0;
  return Step::kMoved;
}

bool SealedStream::flushAll(int fd, Deadline deadline) noexcept {
  try {
    for (;;) {
      Step s = flush(fd);
      if (s == Step::kMoved) return true;
      if (s != Step::kWouldBlock || deadline.expired()) return false;
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, deadline.remainingMs(100)) < 0 && errno != EINTR) return false;
    }
  } catch (...) {
    return false;
  }
}

bool SealedStream::sendAll(int fd, std::span<const uint8_t> bytes, Deadline deadline) noexcept {
  try {
    if (!flushAll(fd, deadline)) return false;
    while (!bytes.empty()) {
      const size_t n = std::min(bytes.size(), auth::kMaxRecordPlain);
      const std::array<std::span<const uint8_t>, 1> part = {bytes.first(n)};
      seal(part);
      bytes = bytes.subspan(n);
      if (!flushAll(fd, deadline)) return false;
    }
    return true;
  } catch (...) {
    return false;
  }
}

SealedStream::Step SealedStream::read(int fd, uint8_t* dst, size_t want, size_t& got) {
  for (;;) {
    if (plainAt_ < plainEnd_) {
      const size_t k = std::min(plainEnd_ - plainAt_, want - got);
      std::memcpy(dst + got, plain_.get() + plainAt_, k);
      plainAt_ += k;
      got += k;
      return Step::kMoved;
    }
    size_t recordBytes = 0;  // of the record at inAt_, once its head is in
    if (inEnd_ - inAt_ >= auth::kRecordHeadBytes) {
      std::string why;
      auto plain = auth::recordLength(in_.get() + inAt_, &why);
      if (!plain) return fail(why + " (record " + std::to_string(opener_.counter()) + ")");
      recordBytes = *plain + auth::kRecordOverhead;
      if (inEnd_ - inAt_ >= recordBytes) {
        // Straight into the caller's buffer when the whole record fits there.
        const bool direct = *plain <= want - got;
        uint8_t* into = direct ? dst + got : plain_.get();
        const uint64_t index = opener_.counter();
        if (!opener_.open(in_.get() + inAt_, *plain, into)) {
          return fail("encrypted record " + std::to_string(index) +
                      " failed authentication (altered, replayed, reordered or cut on the way)");
        }
        inAt_ += recordBytes;
        if (inAt_ == inEnd_) inAt_ = inEnd_ = 0;
        if (direct) {
          got += *plain;
          return Step::kMoved;
        }
        plainAt_ = 0;
        plainEnd_ = *plain;
        continue;
      }
    }
    // Read more (no whole record is here): as much as there is room for.
    if (inAt_ > 0 && kInBytes - inAt_ < std::max(recordBytes, kRecordMax)) {
      std::memmove(in_.get(), in_.get() + inAt_, inEnd_ - inAt_);
      inEnd_ -= inAt_;
      inAt_ = 0;
    }
    ssize_t k = ::recv(fd, in_.get() + inEnd_, kInBytes - inEnd_, MSG_DONTWAIT);
    if (k > 0) {
      inEnd_ += static_cast<size_t>(k);
      continue;
    }
    if (k == 0) {
      if (inEnd_ > inAt_) {
        return fail("connection closed in the middle of encrypted record " +
                    std::to_string(opener_.counter()) + " (cut short)");
      }
      return Step::kClosed;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Step::kWouldBlock;
    return fail(errnoText(errno));
  }
}

SealedStream::Step SealedStream::fail(std::string why) {
  why_ = std::move(why);
  return Step::kFailed;
}

}  // namespace chorus::transport::tcp
