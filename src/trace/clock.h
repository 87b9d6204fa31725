// The recorder's clock. On the hot path it reads the processor's time-stamp counter (a few
// nanoseconds; a clock_gettime costs several times that under a hypervisor) and converts to
// wall-clock microseconds since the Unix epoch only when a dump or record is written, so that
// the dumps of the ranks of one machine line up. Elsewhere: CLOCK_MONOTONIC nanoseconds.
#pragma once

#include <cstdint>
#include <ctime>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace chorus::trace {

inline uint64_t ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
#endif
}

inline uint64_t wallMicros() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

// Fixes the reference point of the conversion (once per process; call before recording).
void startTickClock();
// About how many ticks make `micros` microseconds: the rate is measured once per process over
// a fifth of a millisecond, close enough for intervals that only bound how often a thing is done.
uint64_t roughTicksOf(double micros);
// Converts tick counts to wall-clock time. The rate is measured between the reference point and
// the moment the converter is made, so it sharpens as the process runs; a converter made within
// 50 ms of the reference point waits for the rest of those 50 ms. Make one per dump.
struct WallClock {
  uint64_t refTicks = 0;
  double refNs = 0;
  double nsPerTick = 1;

  static WallClock now();
  // Microseconds since the epoch (0 stays 0: "not reached").
  uint64_t micros(uint64_t tickCount) const {
    if (tickCount == 0) return 0;
    const double ns =
        refNs + (static_cast<double>(tickCount) - static_cast<double>(refTicks)) * nsPerTick;
    return static_cast<uint64_t>(ns / 1000.0);
  }
  double microsOf(double tickSpan) const { return tickSpan * nsPerTick / 1000.0; }
};

}  // namespace chorus::trace
