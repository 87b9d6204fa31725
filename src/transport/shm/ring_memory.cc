#include "transport/shm/ring_memory.h"

#include "common/errno_text.h"

#include <chorus/error.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

namespace chorus::transport::shm {
namespace {

constexpr size_t kHeaderBytes = 4096;  // RingHeader, then RingControl; data from the next page
// Allocated up front: what small messages use before the writer goes back to the ring's start.
constexpr size_t kWarmBytes = 64 * 1024;

struct RingHeader {
  uint64_t magic;
  uint8_t job[16];
  int32_t writer;
  int32_t reader;
  uint64_t ringBytes;
};
constexpr uint64_t kRingMagic = 0x31474e4952524843;  // "CHRRING1"
constexpr size_t kControlAt = 256;
static_assert(sizeof(RingHeader) <= kControlAt && kControlAt + sizeof(RingControl) <= kHeaderBytes);

size_t warmBytes(size_t ringBytes) { return kHeaderBytes + std::min(ringBytes, kWarmBytes); }

std::string ringName(int writer, int reader) {
  return "the shared-memory ring from rank " + std::to_string(writer) + " to rank " +
         std::to_string(reader);
}

}  // namespace

RingMemory::RingMemory(RingMemory&& o) noexcept
    : fd_(std::move(o.fd_)), base_(o.base_), bytes_(o.bytes_) {
  o.base_ = nullptr;
  o.bytes_ = 0;
}

RingMemory& RingMemory::operator=(RingMemory&& o) noexcept {
  if (this != &o) {
    if (base_) ::munmap(base_, bytes_);
    fd_ = std::move(o.fd_);
    base_ = o.base_;
    bytes_ = o.bytes_;
    o.base_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

RingMemory::~RingMemory() {
  if (base_) ::munmap(base_, bytes_);
}

RingControl& RingMemory::control() const {
  return *reinterpret_cast<RingControl*>(static_cast<uint8_t*>(base_) + kControlAt);
}

uint8_t* RingMemory::data() const { return static_cast<uint8_t*>(base_) + kHeaderBytes; }

RingMemory RingMemory::create(const uint8_t job[16], int writer, int reader, size_t ringBytes) {
  RingMemory m;
  m.fd_.reset(::memfd_create("chorus-ring", MFD_CLOEXEC));
  if (!m.fd_) {
    throw Error(ErrorCode::kSystem,
                "memfd_create for " + ringName(writer, reader) + ": " + errnoText(errno));
  }
  // memfd_create makes the file 0777: only its owner may open it through /proc/<pid>/fd.
  if (::fchmod(m.fd_.get(), 0600) < 0) {
    throw Error(ErrorCode::kSystem,
                "fchmod of " + ringName(writer, reader) + ": " + errnoText(errno));
  }
  m.bytes_ = kHeaderBytes + ringBytes;
  if (::ftruncate(m.fd_.get(), static_cast<off_t>(m.bytes_)) < 0) {
    throw Error(ErrorCode::kSystem, "ftruncate of " + ringName(writer, reader) + " (" +
                                        std::to_string(m.bytes_) + " bytes): " + errnoText(errno));
  }
  const size_t warm = warmBytes(ringBytes);
  [[maybe_unused]] int ignored = ::fallocate(m.fd_.get(), 0, 0, static_cast<off_t>(warm));
  // No MAP_POPULATE: it would allocate the whole ring. The rest is allocated as it is written.
  void* p = ::mmap(nullptr, m.bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd_.get(), 0);
  if (p == MAP_FAILED) {
    throw Error(ErrorCode::kSystem,
                "mmap of " + ringName(writer, reader) + ": " + errnoText(errno));
  }
  m.base_ = p;
  ::madvise(p, warm, MADV_WILLNEED);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto* bytes = static_cast<volatile uint8_t*>(p);
  for (size_t at = 0; at < warm; at += page) bytes[at] = 0;
  auto* h = new (p) RingHeader();
  h->magic = kRingMagic;
  std::memcpy(h->job, job, 16);
  h->writer = writer;
  h->reader = reader;
  h->ringBytes = ringBytes;
  new (&m.control()) RingControl();
  return m;
}

RingMemory RingMemory::open(int pid, int fd, const uint8_t job[16], int writer, int reader,
                            size_t ringBytes) {
  std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  RingMemory m;
  m.fd_.reset(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!m.fd_) {
    throw Error(ErrorCode::kPeerFailure,
                "cannot open " + ringName(writer, reader) + " (" + path + "): " + errnoText(errno));
  }
  struct stat st {};
  if (::fstat(m.fd_.get(), &st) < 0 ||
      static_cast<size_t>(st.st_size) != kHeaderBytes + ringBytes) {
    throw Error(ErrorCode::kPeerFailure, path + " is not " + ringName(writer, reader));
  }
  m.bytes_ = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, m.bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd_.get(), 0);
  if (p == MAP_FAILED) {
    throw Error(ErrorCode::kSystem,
                "mmap of " + ringName(writer, reader) + ": " + errnoText(errno));
  }
  m.base_ = p;
  const auto& h = *static_cast<const RingHeader*>(p);
  if (h.magic != kRingMagic || std::memcmp(h.job, job, 16) != 0 || h.writer != writer ||
      h.reader != reader || h.ringBytes != ringBytes) {
    throw Error(ErrorCode::kPeerFailure,
                path + " is not " + ringName(writer, reader) + " of this job");
  }
  m.fd_.reset();
  // Map the pages the writer allocated up front (reading them allocates nothing).
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const auto* bytes = static_cast<const volatile uint8_t*>(p);
  for (size_t at = 0; at < warmBytes(ringBytes); at += page) (void)bytes[at];
  return m;
}

}  // namespace chorus::transport::shm
