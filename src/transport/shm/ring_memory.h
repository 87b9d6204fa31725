// The memory of one ring (writer -> reader), made by the writer when it first sends to the
// reader: a memfd of its own holding the ring's control words and its data. Pages are allocated
// as they are first written, so a ring that only ever carries small messages stays a few pages
// (the writer goes back to the ring's start whenever the reader has caught up), and a ring that
// is never used costs nothing.
#pragma once

#include "common/fd.h"
#include "transport/shm/segment.h"

#include <cstddef>
#include <cstdint>

namespace chorus::transport::shm {

class RingMemory {
 public:
  RingMemory() = default;
  RingMemory(RingMemory&& o) noexcept;
  RingMemory& operator=(RingMemory&& o) noexcept;
  RingMemory(const RingMemory&) = delete;
  ~RingMemory();

  // A new ring of ringBytes (a multiple of kCacheLine) from writer to reader; its first pages
  // are allocated and mapped now (a page fault costs tens of microseconds on some virtual
  // machines, far more than the copy of a small message through that page).
  static RingMemory create(const uint8_t job[16], int writer, int reader, size_t ringBytes);
  // Maps the ring that writer (process pid) made for reader as descriptor fd. Throws
  // Error(kSystem) naming the writer when it cannot be opened or does not match.
  static RingMemory open(int pid, int fd, const uint8_t job[16], int writer, int reader,
                         size_t ringBytes);

  RingControl& control() const;
  uint8_t* data() const;
  int fd() const { return fd_.get(); }
  // Closes the descriptor (the reader has its own mapping); the memory stays.
  void closeFd() { fd_.reset(); }
  explicit operator bool() const { return base_ != nullptr; }

 private:
  Fd fd_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace chorus::transport::shm
