// Simulated time: integer picoseconds, so that equal times compare equal and runs are
// deterministic.
#pragma once

#include <cmath>
#include <cstdint>

namespace chorus::sim {

using Time = int64_t;  // picoseconds

inline Time toPs(double seconds) { return static_cast<Time>(std::llround(seconds * 1e12)); }
inline double toSeconds(Time t) { return static_cast<double>(t) * 1e-12; }

}  // namespace chorus::sim
