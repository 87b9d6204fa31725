// The process's registry of registered buffers and each communicator's mappings of its peers'
// (core/registered_memory.h).
#include "core/registered_memory.h"

#include "common/errno_text.h"

#include <chorus/error.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace chorus::registered {
namespace {

constexpr size_t kHeaderBytes = 4096;  // one page before the buffer: the segment's header
constexpr uint64_t kMagic = 0x43686f7275735247ULL;  // "ChorusRG"

// The first bytes of every segment: what a peer checks before it trusts a mapping.
struct Header {
  uint64_t magic;
  uint64_t pid;
  uint64_t serial;
  uint64_t bytes;  // the whole segment
};

struct Segment {
  uint8_t* base = nullptr;  // the mapping (header first)
  size_t bytes = 0;         // the mapping's size
  size_t userBytes = 0;     // what allocate() was asked for
  int fd = -1;
  uint64_t serial = 0;
  const void* owner = nullptr;
  int pins = 0;  // collectives in flight that use it
};

std::string hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

class Registry {
 public:
  static Registry& get() {
    static Registry* r = new Registry();  // never destroyed: frees may come during exit
    return *r;
  }

  void* allocate(size_t bytes, const void* owner) {
    if (bytes == 0) {
      throw Error(ErrorCode::kInvalidArgument, "chorus_mem_alloc: a buffer of 0 bytes");
    }
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    if (bytes > SIZE_MAX / 2) {
      throw Error(ErrorCode::kInvalidArgument,
                  "chorus_mem_alloc: " + std::to_string(bytes) + " bytes is too large");
    }
    const size_t total = kHeaderBytes + (bytes + page - 1) / page * page;
    int fd = ::memfd_create("chorus-registered", MFD_CLOEXEC);
    if (fd < 0)
      throw Error(ErrorCode::kSystem, "chorus_mem_alloc: memfd_create: " + errnoText(errno));
    // memfd_create makes the file 0777: only its owner may open it through /proc/<pid>/fd.
    if (::fchmod(fd, 0600) < 0 || ::ftruncate(fd, static_cast<off_t>(total)) < 0) {
      const int e = errno;
      ::close(fd);
      throw Error(ErrorCode::kSystem, "chorus_mem_alloc: a shared segment of " +
                                          std::to_string(total) + " bytes: " + errnoText(e));
    }
    void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      throw Error(ErrorCode::kSystem,
                  "chorus_mem_alloc: mmap of " + std::to_string(total) + " bytes: " + errnoText(e));
    }
    Segment s;
    s.base = static_cast<uint8_t*>(p);
    s.bytes = total;
    s.userBytes = bytes;
    s.fd = fd;
    s.owner = owner;
    std::lock_guard<std::mutex> lock(mu_);
    s.serial = ++serials_;
    new (p) Header{kMagic, static_cast<uint64_t>(::getpid()), s.serial, total};
    uint8_t* user = s.base + kHeaderBytes;
    segments_.emplace(reinterpret_cast<uintptr_t>(user), s);
    live_.store(segments_.size(), std::memory_order_relaxed);
    return user;
  }

  void release(void* p) {
    Segment s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = segments_.find(reinterpret_cast<uintptr_t>(p));
      if (it == segments_.end()) {
        throw Error(ErrorCode::kInvalidArgument,
                    "chorus_mem_free: " + hex(p) +
                        " is not a buffer from chorus_mem_alloc (or was freed already)");
      }
      if (it->second.pins > 0) {
        throw Error(ErrorCode::kInvalidArgument,
                    "chorus_mem_free: the buffer at " + hex(p) + " is in use by " +
                        std::to_string(it->second.pins) +
                        " collective(s) in flight; wait for them before freeing it");
      }
      s = it->second;
      segments_.erase(it);
      live_.store(segments_.size(), std::memory_order_relaxed);
    }
    // Peers that mapped it keep their mapping (and the memory) until they drop it.
    ::munmap(s.base, s.bytes);
    ::close(s.fd);
  }

  size_t disown(const void* owner, size_t& bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    bytes = 0;
    for (auto& [at, s] : segments_) {
      if (s.owner != owner) continue;
      s.owner = nullptr;
      ++n;
      bytes += s.userBytes;
    }
    return n;
  }

  size_t live() const { return live_.load(std::memory_order_relaxed); }

  // The segment holding [p, p + bytes), or null; needs mu_ held.
  Segment* find(const void* p, size_t bytes) {
    const auto at = reinterpret_cast<uintptr_t>(p);
    auto it = segments_.upper_bound(at);
    if (it == segments_.begin()) return nullptr;
    --it;
    Segment& s = it->second;
    if (at - it->first > s.userBytes || bytes > s.userBytes - (at - it->first)) return nullptr;
    return &s;
  }

  bool describe(const void* p, size_t bytes, algo::SharedRef& ref) {
    if (live() == 0) return false;
    std::lock_guard<std::mutex> lock(mu_);
    Segment* s = find(p, bytes);
    if (s == nullptr) return false;
    ref.pid = static_cast<uint64_t>(::getpid());
    ref.fd = static_cast<uint64_t>(s->fd);
    ref.serial = s->serial;
    ref.segmentBytes = s->bytes;
    ref.base = reinterpret_cast<uintptr_t>(s->base);
    ref.offset = reinterpret_cast<uintptr_t>(p) - ref.base;
    return true;
  }

  // Pins the segments of in and out; returns the serials pinned (0: none).
  std::shared_ptr<void> pin(const void* in, const void* out) {
    if (live() == 0) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    Segment* a = in ? find(in, 0) : nullptr;
    Segment* b = out ? find(out, 0) : nullptr;
    if (b == a) b = nullptr;
    if (a == nullptr && b == nullptr) return nullptr;
    std::vector<uintptr_t> keys;
    for (Segment* s : {a, b}) {
      if (s == nullptr) continue;
      ++s->pins;
      keys.push_back(reinterpret_cast<uintptr_t>(s->base + kHeaderBytes));
    }
    auto* held = new std::vector<uintptr_t>(std::move(keys));
    return std::shared_ptr<void>(held, [this](void* v) {
      auto* k = static_cast<std::vector<uintptr_t>*>(v);
      {
        std::lock_guard<std::mutex> unpinLock(mu_);
        for (uintptr_t key : *k) {
          auto it = segments_.find(key);
          if (it != segments_.end()) --it->second.pins;
        }
      }
      delete k;
    });
  }

 private:
  std::mutex mu_;
  std::map<uintptr_t, Segment> segments_;  // by the buffer's address
  std::atomic<size_t> live_{0};
  uint64_t serials_ = 0;
};

// A peer's segment mapped into this process.
struct Mapping {
  uint64_t pid = 0;
  uint64_t serial = 0;
  uint8_t* base = nullptr;
  size_t bytes = 0;
  uint64_t lastUse = 0;
};

class Access final : public algo::SharedMemoryAccess {
 public:
  ~Access() override {
    for (Mapping& m : maps_) ::munmap(m.base, m.bytes);
  }

  bool describe(const void* p, size_t bytes, algo::SharedRef& ref) const override {
    return Registry::get().describe(p, bytes, ref);
  }

  uint8_t* map(int peer, const algo::SharedRef& ref, std::string& why) override {
    if (ref.offset < kHeaderBytes || ref.offset > ref.segmentBytes) {
      why = "rank " + std::to_string(peer) + " described a buffer outside its segment";
      return nullptr;
    }
    // Ranks that are threads of this process share its address space.
    if (ref.pid == static_cast<uint64_t>(::getpid())) {
      return reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(ref.base)) + ref.offset;
    }
    ++uses_;
    for (Mapping& m : maps_) {
      if (m.pid == ref.pid && m.serial == ref.serial) {
        m.lastUse = uses_;
        return m.base + ref.offset;
      }
    }
    Mapping m;
    if (!open(peer, ref, m, why)) return nullptr;
    if (maps_.size() >= kMaxMappings) {
      auto oldest = std::min_element(
          maps_.begin(), maps_.end(),
          [](const Mapping& x, const Mapping& y) { return x.lastUse < y.lastUse; });
      ::munmap(oldest->base, oldest->bytes);
      maps_.erase(oldest);
    }
    m.lastUse = uses_;
    maps_.push_back(m);
    return m.base + ref.offset;
  }

 private:
  // Mappings kept: a peer's freed buffers stay mapped (and their memory alive) until evicted.
  static constexpr size_t kMaxMappings = 32;

  static bool open(int peer, const algo::SharedRef& ref, Mapping& m, std::string& why) {
    const std::string path = "/proc/" + std::to_string(ref.pid) + "/fd/" + std::to_string(ref.fd);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      why = "cannot open rank " + std::to_string(peer) + "'s registered buffer (" + path +
            "): " + errnoText(errno);
      return false;
    }
    struct stat st {};
    void* p = MAP_FAILED;
    if (::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) == ref.segmentBytes) {
      p = ::mmap(nullptr, ref.segmentBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
                 0);
    }
    ::close(fd);  // the mapping keeps the memory alive
    if (p == MAP_FAILED) {
      why = "cannot map rank " + std::to_string(peer) + "'s registered buffer (" + path + ")";
      return false;
    }
    const auto* h = static_cast<const Header*>(p);
    if (h->magic != kMagic || h->pid != ref.pid || h->serial != ref.serial ||
        h->bytes != ref.segmentBytes) {
      ::munmap(p, ref.segmentBytes);
      why = path + " is not the registered buffer rank " + std::to_string(peer) + " described";
      return false;
    }
    m.pid = ref.pid;
    m.serial = ref.serial;
    m.base = static_cast<uint8_t*>(p);
    m.bytes = ref.segmentBytes;
    return true;
  }

  std::vector<Mapping> maps_;
  uint64_t uses_ = 0;
};

}  // namespace

void* allocate(size_t bytes, const void* owner) { return Registry::get().allocate(bytes, owner); }
void release(void* p) { Registry::get().release(p); }
size_t disown(const void* owner, size_t& bytes) { return Registry::get().disown(owner, bytes); }
size_t liveCount() { return Registry::get().live(); }
std::shared_ptr<void> pin(const void* in, const void* out) { return Registry::get().pin(in, out); }
std::unique_ptr<algo::SharedMemoryAccess> makeAccess() { return std::make_unique<Access>(); }

}  // namespace chorus::registered
