// ThreadSanitizer's view of the rings. When ranks are threads of one process (the tests), each
// rank maps the other's segment at an address of its own, and ThreadSanitizer, which tracks
// memory by address, sees the writer publish a ring's head at one address and the reader load it
// at another: the order the ring gives goes unseen and every message reads as a data race. Under
// ThreadSanitizer a ring's words are therefore also announced on an address of this process that
// both ends derive from the ring's identity (job, owner rank, ring slot). Two rings that land on
// the same address only add order that ThreadSanitizer then assumes (a race could go unreported,
// none is invented). Without ThreadSanitizer this is nothing: keys are computed once at setup.
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

#if defined(__SANITIZE_THREAD__)
inline void* ringSyncAddress(uint64_t key, RingWord w) {
  static char addresses[4096];
  return &addresses[(key * 3 + static_cast<uint32_t>(w)) % sizeof(addresses)];
}
// Before the store that publishes.
inline void ringReleased(uint64_t key, RingWord w) { __tsan_release(ringSyncAddress(key, w)); }
// After the load that observes.
inline void ringAcquired(uint64_t key, RingWord w) { __tsan_acquire(ringSyncAddress(key, w)); }
#else
inline void ringReleased(uint64_t, RingWord) {}
inline void ringAcquired(uint64_t, RingWord) {}
#endif

}  // namespace chorus::transport::shm
