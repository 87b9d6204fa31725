// Shared-memory segments between ranks of one host: each rank creates one small segment (a memfd,
// so nothing is ever left in /dev/shm, not even after kill -9) with its control words and a
// directory of its outgoing rings; peers map it through /proc/<pid>/fd/<fd>. The rings
// themselves (ring_memory.h) are made only when a rank first sends to a peer, so memory grows
// with the pairs that talk, not with the square of the ranks on a host.
#pragma once

#include "common/fd.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace chorus::transport::shm {

inline constexpr size_t kCacheLine = 64;

// Control words of one single-producer single-consumer ring, each on its own cache line so the
// writer and the reader never contend for one line.
struct RingControl {
  alignas(kCacheLine) std::atomic<uint64_t> head{0};   // bytes published by the writer
  alignas(kCacheLine) std::atomic<uint64_t> tail{0};   // bytes consumed by the reader
  alignas(kCacheLine) std::atomic<uint64_t> acked{0};  // single-copy messages the reader took
};

// Where the reader finds the ring its writer made for it: the writer's descriptor, published
// once (state kReady) after the ring is initialised; the reader sets kMapped once it has its own
// mapping, so the writer may close the descriptor.
struct RingEntry {
  static constexpr uint32_t kAbsent = 0, kReady = 1, kMapped = 2;
  std::atomic<uint32_t> state{kAbsent};
  int32_t fd = -1;
  uint64_t ringBytes = 0;
};

struct SegmentHeader {
  uint64_t magic;
  uint8_t job[16];
  int32_t rank;
  int32_t pid;
  uint32_t entries;  // RingEntry slots, one per rank of the communicator
  uint32_t reserved;
  uint64_t ringBytes;  // unused; kept for the layout
  // Set while the owner sleeps in epoll_wait; whoever changes a ring it waits on clears it and
  // sends a wake-up frame over the TCP control connection.
  alignas(kCacheLine) std::atomic<uint32_t> sleeping{0};
  // 1 + the sequence number of the collective in which the owner aborted (0: it has not). Data
  // it left in a ring may complete a peer's receive; this tells the peer to fetch the reason
  // from the TCP connection and fail like the others.
  alignas(kCacheLine) std::atomic<uint64_t> abortedAt{0};
};

inline constexpr uint64_t kSegmentMagic = 0x32484d5353524843;  // "CHRSSMH2"

// One mapped segment: this rank's own (create) or a peer's (open).
class Segment {
 public:
  Segment() = default;
  Segment(Segment&& o) noexcept;
  Segment& operator=(Segment&& o) noexcept;
  Segment(const Segment&) = delete;
  ~Segment();

  // A new segment with one ring entry per rank (ranks: the communicator's size).
  static Segment create(const uint8_t job[16], int rank, uint32_t ranks);
  // Maps the segment that rank `rank` (process pid) created as file descriptor fd. Throws
  // Error(kSystem) when the kernel refuses (another pid namespace, no /proc) or the content does
  // not match.
  static Segment open(int pid, int fd, const uint8_t job[16], int rank);

  SegmentHeader& header() const { return *static_cast<SegmentHeader*>(base_); }
  // The entry of the ring from this segment's owner to `reader`.
  RingEntry& entry(int reader) const;
  int fd() const { return fd_.get(); }
  uintptr_t address() const { return reinterpret_cast<uintptr_t>(base_); }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return base_ != nullptr; }

 private:
  static size_t layoutBytes(uint32_t ranks);
  Fd fd_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace chorus::transport::shm
