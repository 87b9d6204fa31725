// Wall-clock microseconds since the Unix epoch: what the recorder stamps, so that the dumps of the
// ranks of one machine line up.
#pragma once

#include <cstdint>
#include <ctime>

namespace chorus::trace {

inline uint64_t wallMicros() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

}  // namespace chorus::trace
