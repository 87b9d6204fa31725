// Shared-memory segments between ranks of one host: each rank creates one (a memfd, so nothing
// is ever left in /dev/shm, not even after kill -9) holding its outgoing rings, one per local
// peer; peers map it through /proc/<pid>/fd/<fd>. The segment is sparse: a page is allocated when
// it is first written, so a ring costs memory only once its writer sends to that peer (the first
// send warms its first pages), a ring that only carries small messages stays a few pages (the
// writer goes back to the ring's start whenever the reader has caught up), and one that is never
// used costs nothing but address space. Mapping every peer's segment at setup keeps what a
// writer left in a ring readable after the writer's process is gone, as a socket's buffer is.
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

// What the owner writes once at creation, before any peer opens the segment: peers read it
// through the descriptor (Segment::open), without touching the mapping.
struct SegmentIdentity {
  uint64_t magic;
  uint8_t job[16];
  int32_t rank;
  int32_t pid;
  uint32_t rings;
  uint32_t reserved;
  uint64_t ringBytes;
};

struct SegmentHeader {
  SegmentIdentity id;
  // Set while the owner sleeps in epoll_wait; whoever changes a ring it waits on clears it and
  // sends a wake-up frame over the TCP control connection.
  alignas(kCacheLine) std::atomic<uint32_t> sleeping{0};
  // 1 + the sequence number of the collective in which the owner aborted (0: it has not). Data
  // it left in a ring may complete a peer's receive; this tells the peer to fetch the reason
  // from the TCP connection and fail like the others.
  alignas(kCacheLine) std::atomic<uint64_t> abortedAt{0};
};

inline constexpr uint64_t kSegmentMagic = 0x31484d5353524843;  // "CHRSSMH1"

// Allocates and maps the first pages of a ring (its control words and up to 64 KiB of data),
// which small messages use: on some virtual machines a page fault costs tens of microseconds,
// more than the copy of a small message. Called by the writer before its first send.
void warmRing(RingControl& control, size_t ringBytes);

// One mapped segment: this rank's own (create) or a peer's (open).
class Segment {
 public:
  Segment() = default;
  Segment(Segment&& o) noexcept;
  Segment& operator=(Segment&& o) noexcept;
  Segment(const Segment&) = delete;
  ~Segment();

  // A new segment with `rings` rings of ringBytes (a multiple of kCacheLine), none allocated.
  static Segment create(const uint8_t job[16], int rank, uint32_t rings, size_t ringBytes);
  // Maps the segment that rank `rank` (process pid) created as file descriptor fd. Throws
  // Error(kSystem) when the kernel refuses (another pid namespace, no /proc) or the content does
  // not match.
  static Segment open(int pid, int fd, const uint8_t job[16], int rank);

  SegmentHeader& header() const { return *static_cast<SegmentHeader*>(base_); }
  RingControl& control(uint32_t ring) const;
  uint8_t* data(uint32_t ring) const;
  int fd() const { return fd_.get(); }
  // Where ring `ring`'s data starts in a segment of rings of ringBytes (for measurements).
  static size_t dataOffset(uint32_t ring, size_t ringBytes);
  uintptr_t address() const { return reinterpret_cast<uintptr_t>(base_); }
  explicit operator bool() const { return base_ != nullptr; }

 private:
  static size_t layoutBytes(uint32_t rings, size_t ringBytes);
  static size_t ringStride(size_t ringBytes);
  Fd fd_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  size_t ringBytes_ = 0;  // kept here: reading the header would map its page
};

}  // namespace chorus::transport::shm
