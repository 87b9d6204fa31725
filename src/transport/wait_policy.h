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

// Whether the request's end is far: `moved` bytes moved in `elapsed` since the wait began,
// `remaining` still to move, at that rate, take longer than `farAfter`.
inline bool endIsFar(size_t moved, std::chrono::nanoseconds elapsed, size_t remaining,
                     std::chrono::nanoseconds farAfter) {
  if (moved < kRateSampleBytes || elapsed.count() <= 0) return false;
  const double secondsLeft = static_cast<double>(remaining) / static_cast<double>(moved) *
                             static_cast<double>(elapsed.count());
  return secondsLeft > static_cast<double>(farAfter.count());
}

// How long to nap before looking again at a request whose end is far: the time kNapBytes take
// at the rate so far, at most kLongestNap.
inline std::chrono::nanoseconds napFor(size_t moved, std::chrono::nanoseconds elapsed) {
  if (moved == 0) return std::chrono::nanoseconds(0);
  const double ns = static_cast<double>(kNapBytes) / static_cast<double>(moved) *
                    static_cast<double>(elapsed.count());
  return std::min(std::chrono::nanoseconds(static_cast<long long>(ns)),
                  std::chrono::nanoseconds(kLongestNap));
}

}  // namespace chorus::transport
