// The encrypted byte stream of one TCP connection between ranks (CHORUS_ENCRYPT=1): what the
// link writes is sealed into AES-256-GCM records (auth/record_cipher.h) and what it reads is
// opened from them. Memory stays bounded however large the messages (per connection: one record
// out, four records of read-ahead and one opened record in, about 384 KiB), and records go out as
// they are sealed, so large messages still pipeline.
#pragma once

#include "auth/record_cipher.h"
#include "common/deadline.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace chorus::transport::tcp {

class SealedStream {
 public:
  explicit SealedStream(const auth::StreamKeys& keys);

  enum class Step {
    kMoved,       // bytes moved (read: into the caller's buffer; flush: all of the record)
    kWouldBlock,  // the socket has nothing / no room now
    kClosed,      // the peer closed the connection at a record boundary
    kFailed,      // see why(): a socket error, or a record cut short, too long or not authentic
  };

  // Sending. The record sealed last is written before the next one can be sealed.
  bool hasOutput() const { return outAt_ < outEnd_; }
  // Seals the concatenation of parts (1 .. auth::kMaxRecordPlain bytes) as the next record.
  void seal(std::span<const std::span<const uint8_t>> parts);
  // Writes what is left of the record without blocking.
  Step flush(int fd);
  // Seals `bytes` (any length, in records) and writes them all, waiting up to the deadline.
  // False on a socket error or at the deadline (for control frames: abort, goodbye, wake-up).
  bool sendAll(int fd, std::span<const uint8_t> bytes, Deadline deadline) noexcept;
  // Writes what is left of the record, waiting up to the deadline.
  bool flushAll(int fd, Deadline deadline) noexcept;

  // Receiving: moves plaintext into dst[got, want), opening records as they arrive (a whole
  // record that fits is opened straight into dst).
  Step read(int fd, uint8_t* dst, size_t want, size_t& got);
  // Whether bytes already read from the socket wait here (epoll will not announce them).
  bool buffered() const { return plainAt_ < plainEnd_ || inEnd_ > inAt_; }
  const std::string& why() const { return why_; }
  // A read or write failed: nothing more on this stream can be trusted.
  bool broken() const { return !why_.empty(); }

 private:
  Step fail(std::string why);

  auth::RecordCipher sealer_;
  auth::RecordCipher opener_;
  std::unique_ptr<uint8_t[]> out_;
  size_t outAt_ = 0;
  size_t outEnd_ = 0;
  // Ciphertext read ahead: in_[inAt_, inEnd_); room for four whole records.
  std::unique_ptr<uint8_t[]> in_;
  size_t inAt_ = 0;
  size_t inEnd_ = 0;
  // An opened record not yet taken by the reader: plain_[plainAt_, plainEnd_).
  std::unique_ptr<uint8_t[]> plain_;
  size_t plainAt_ = 0;
  size_t plainEnd_ = 0;
  std::string why_;
};

}  // namespace chorus::transport::tcp
