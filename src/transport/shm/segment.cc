#include "transport/shm/segment.h"

#include "common/errno_text.h"

#include <chorus/error.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <new>

namespace chorus::transport::shm {

namespace {
constexpr size_t kHeaderBytes = 4096;
}

Segment::Segment(Segment&& o) noexcept
    : fd_(std::move(o.fd_)), base_(o.base_), bytes_(o.bytes_), ringBytes_(o.ringBytes_) {
  o.base_ = nullptr;
  o.bytes_ = 0;
  o.ringBytes_ = 0;
}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    if (base_) ::munmap(base_, bytes_);
    fd_ = std::move(o.fd_);
    base_ = o.base_;
    bytes_ = o.bytes_;
    ringBytes_ = o.ringBytes_;
    o.base_ = nullptr;
    o.bytes_ = 0;
    o.ringBytes_ = 0;
  }
  return *this;
}

Segment::~Segment() {
  if (base_) ::munmap(base_, bytes_);
}

size_t Segment::ringStride(size_t ringBytes) { return sizeof(RingControl) + ringBytes; }

size_t Segment::layoutBytes(uint32_t rings, size_t ringBytes) {
  return kHeaderBytes + rings * ringStride(ringBytes);
}

size_t Segment::dataOffset(uint32_t ring, size_t ringBytes) {
  return kHeaderBytes + ring * ringStride(ringBytes) + sizeof(RingControl);
}

RingControl& Segment::control(uint32_t ring) const {
  auto* p = static_cast<uint8_t*>(base_) + kHeaderBytes + ring * ringStride(ringBytes_);
  return *reinterpret_cast<RingControl*>(p);
}

uint8_t* Segment::data(uint32_t ring) const {
  return reinterpret_cast<uint8_t*>(&control(ring)) + sizeof(RingControl);
}

void warmRing(RingControl& control, size_t ringBytes) {
  constexpr size_t kWarmBytes = 64 * 1024;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto* first = reinterpret_cast<uint8_t*>(&control);
  const size_t bytes = sizeof(RingControl) + std::min(ringBytes, kWarmBytes);
  const size_t start = reinterpret_cast<uintptr_t>(first) / page * page;
  const size_t end = reinterpret_cast<uintptr_t>(first) + bytes;
  // Adding zero to an atomic word allocates its page without changing what a peer may have
  // written there already (the reader's tail lives in the first page).
  for (size_t at = start; at < end; at += page) {
    reinterpret_cast<std::atomic<uint64_t>*>(at)->fetch_add(0, std::memory_order_relaxed);
  }
}

Segment Segment::create(const uint8_t job[16], int rank, uint32_t rings, size_t ringBytes) {
  static_assert(sizeof(SegmentHeader) <= kHeaderBytes);
  static_assert(sizeof(RingControl) % kCacheLine == 0);
  Segment s;
  s.fd_.reset(::memfd_create("chorus-shm", MFD_CLOEXEC));
  if (!s.fd_) throw Error(ErrorCode::kSystem, "memfd_create: " + errnoText(errno));
  // memfd_create makes the file 0777: only its owner may open it through /proc/<pid>/fd.
  if (::fchmod(s.fd_.get(), 0600) < 0) {
    throw Error(ErrorCode::kSystem, "fchmod of a shared-memory segment: " + errnoText(errno));
  }
  s.bytes_ = layoutBytes(rings, ringBytes);
  s.ringBytes_ = ringBytes;
  if (::ftruncate(s.fd_.get(), static_cast<off_t>(s.bytes_)) < 0) {
    throw Error(ErrorCode::kSystem, "ftruncate of a shared-memory segment of " +
                                        std::to_string(s.bytes_) + " bytes: " + errnoText(errno));
  }
  // Map the header only up front (MAP_POPULATE would allocate every ring): rings are warmed by
  // their writer on first use (warmRing) and otherwise allocated as written.
  void* p = ::mmap(nullptr, s.bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd_.get(), 0);
  if (p == MAP_FAILED) throw Error(ErrorCode::kSystem, "mmap: " + errnoText(errno));
  s.base_ = p;
  auto* h = new (p) SegmentHeader();
  h->id.magic = kSegmentMagic;
  std::memcpy(h->id.job, job, 16);
  h->id.rank = rank;
  h->id.pid = static_cast<int32_t>(::getpid());
  h->id.rings = rings;
  h->id.ringBytes = ringBytes;
  // The rings' control words start at zero, as the file does: nothing to write (writing would
  // allocate a page per ring).
  return s;
}

Segment Segment::open(int pid, int fd, const uint8_t job[16], int rank) {
  std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  Segment s;
  s.fd_.reset(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!s.fd_) {
    throw Error(ErrorCode::kSystem, "cannot open rank " + std::to_string(rank) +
                                        "'s shared memory (" + path + "): " + errnoText(errno));
  }
  struct stat st {};
  if (::fstat(s.fd_.get(), &st) < 0 || static_cast<size_t>(st.st_size) < kHeaderBytes) {
    throw Error(ErrorCode::kSystem, path + " is not a shared-memory segment");
  }
  s.bytes_ = static_cast<size_t>(st.st_size);
  // The header is checked through the descriptor, not the mapping: touching the mapping would
  // map a page in this process for every peer on the host, on some virtual machines at tens of
  // microseconds each, where most pairs never talk.
  SegmentIdentity h{};
  static_assert(offsetof(SegmentHeader, id) == 0);
  if (::pread(s.fd_.get(), &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h)) ||
      h.magic != kSegmentMagic || std::memcmp(h.job, job, 16) != 0 || h.rank != rank ||
      h.pid != pid || layoutBytes(h.rings, h.ringBytes) != s.bytes_) {
    throw Error(ErrorCode::kSystem,
                path + " is not rank " + std::to_string(rank) + "'s segment of this job");
  }
  // Address space only: a page is mapped when this rank first reads it, after its writer wrote
  // it (reading a page nobody wrote would allocate it).
  void* p = ::mmap(nullptr, s.bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, s.fd_.get(), 0);
  if (p == MAP_FAILED) throw Error(ErrorCode::kSystem, "mmap: " + errnoText(errno));
  s.base_ = p;
  s.ringBytes_ = h.ringBytes;
  // The descriptor is only needed to map; the mapping keeps the memory alive.
  s.fd_.reset();
  return s;
}

}  // namespace chorus::transport::shm
