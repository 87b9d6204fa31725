// ThreadSanitizer's view of the rings. When ranks are threads of one process (the tests), each
// rank maps the other's segment at an address of its own, and ThreadSanitizer, which tracks
// memory by address, sees the writer publish a ring's head at one address and the reader load it
// at another: the order the ring gives goes unseen and every message reads as a data race. Under
// ThreadSanitizer a ring's words are therefore also announced on an address of this process that
// both ends derive from the ring's identity (job, owner rank, ring slot). Two rings that land on
// the same address only add order that ThreadSanitizer then assumes (a race could go unreported,
// none is invented). Without ThreadSanitizer this is nothing, not even the keys: a channel's
// fields keep their places (two more words in the channel's configuration cost the 8-byte
// shared-memory all-reduce 2-3 points in recorder-ab's on/off ratio).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace chorus::transport::shm {

// Which word of a ring an announcement is about.
enum class RingWord : uint32_t { kHead, kTail, kAcked };

// A ring's identity as both of its ends compute it.
inline uint64_t ringSyncKey(const uint8_t job[16], int ownerRank, uint32_t slot) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&](uint64_t byte) { h = (h ^ byte) * 1099511628211ull; };
  for (int i = 0; i < 16; ++i) mix(job[i]);
  for (int i = 0; i < 4; ++i) mix((static_cast<uint32_t>(ownerRank) >> (8 * i)) & 0xff);
  for (int i = 0; i < 4; ++i) mix((slot >> (8 * i)) & 0xff);
  return h;
}

// Which of a channel's two rings: the one it writes or the one it reads.
enum class RingEnd { kOut, kIn };

// A channel's two ring identities; empty without ThreadSanitizer.
struct RingSyncKeys {
#if defined(__SANITIZE_THREAD__)
  uint64_t out = 0;
  uint64_t in = 0;
#endif
  static RingSyncKeys of([[maybe_unused]] uint64_t outKey, [[maybe_unused]] uint64_t inKey) {
    RingSyncKeys k;
#if defined(__SANITIZE_THREAD__)
    k.out = outKey;
    k.in = inKey;
#endif
    return k;
  }
};

#if defined(__SANITIZE_THREAD__)
inline void* ringSyncAddress(const RingSyncKeys& k, RingEnd end, RingWord w) {
  static char addresses[4096];
  const uint64_t key = end == RingEnd::kOut ? k.out : k.in;
  return &addresses[(key * 3 + static_cast<uint32_t>(w)) % sizeof(addresses)];
}
// Before the store that publishes.
inline void ringReleased(const RingSyncKeys& k, RingEnd end, RingWord w) {
  __tsan_release(ringSyncAddress(k, end, w));
}
// After the load that observes.
inline void ringAcquired(const RingSyncKeys& k, RingEnd end, RingWord w) {
  __tsan_acquire(ringSyncAddress(k, end, w));
}
#else
inline void ringReleased(const RingSyncKeys&, RingEnd, RingWord) {}
inline void ringAcquired(const RingSyncKeys&, RingEnd, RingWord) {}
#endif

}  // namespace chorus::transport::shm
