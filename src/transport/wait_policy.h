// When a wait should poll before it sleeps. Polling pays while the awaited message is about to
// complete (a wake-up costs more than a small message's round trip); while a large transfer
// streams in at the link's pace, every poll between two arrivals is a wasted cycle, taken from
// the kernel that moves the bytes and from the other ranks on the core. So a wait over TCP that
// has already seen the request move estimates its end from the rate so far, and sleeps in the
// kernel while that end is further away than a few spins: first a short nap that lets a batch of
// bytes gather in the socket (one wake-up and one large read instead of one per packet), then
// epoll.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>

namespace chorus::transport {

// Bytes a request must have moved during the wait before its rate is trusted: below this, the
// first read may only have drained what the kernel had buffered.
inline constexpr size_t kRateSampleBytes = 64 << 10;

// The batch a nap lets gather, and the longest nap: well inside the socket buffers, so that
// neither the sender nor this rank's own sends run dry while it sleeps.
inline constexpr size_t kNapBytes = 64 << 10;
inline constexpr std::chrono::microseconds kLongestNap{500};

// A wait's rate estimate: `moved` bytes in `elapsed` since it began, trusted from
// kRateSampleBytes on.
inline double rateOf(size_t moved, std::chrono::nanoseconds elapsed) {
  if (moved < kRateSampleBytes || elapsed.count() <= 0) return 0;
  return static_cast<double>(moved) / static_cast<double>(elapsed.count());  // bytes per ns
}

// Whether a request's end is far: `remaining` bytes at `bytesPerNs` (0: unknown, not far) take
// longer than `farAfter`.
inline bool endIsFarAt(double bytesPerNs, size_t remaining, std::chrono::nanoseconds farAfter) {
  if (bytesPerNs <= 0) return false;
  return static_cast<double>(remaining) / bytesPerNs > static_cast<double>(farAfter.count());
}
inline bool endIsFar(size_t moved, std::chrono::nanoseconds elapsed, size_t remaining,
                     std::chrono::nanoseconds farAfter) {
  return endIsFarAt(rateOf(moved, elapsed), remaining, farAfter);
}

// How long to nap before looking again at a request whose end is far: the time kNapBytes take
// at that rate, at most kLongestNap.
inline std::chrono::nanoseconds napAt(double bytesPerNs) {
  if (bytesPerNs <= 0) return std::chrono::nanoseconds(0);
  const double ns = static_cast<double>(kNapBytes) / bytesPerNs;
  return std::min(std::chrono::nanoseconds(static_cast<long long>(ns)),
                  std::chrono::nanoseconds(kLongestNap));
}
inline std::chrono::nanoseconds napFor(size_t moved, std::chrono::nanoseconds elapsed) {
  if (moved == 0 || elapsed.count() <= 0) return std::chrono::nanoseconds(0);
  return napAt(static_cast<double>(moved) / static_cast<double>(elapsed.count()));
}

// How long a wait's rate stays a fair guess for the next wait on the same peer and direction
// (the next segment of a ring step, mostly): until the next wait has a sample of its own, it
// naps at that rate instead of polling through its first kRateSampleBytes.
inline constexpr std::chrono::milliseconds kCarriedRateFor{200};

}  // namespace chorus::transport
