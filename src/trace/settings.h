// The recorder's settings, from the environment (docs/trace-format.md).
#pragma once

#include <cstddef>
#include <string>

namespace chorus::trace {

struct Settings {
  size_t entries = 2048;       // CHORUS_TRACE_ENTRIES; 0: recorder off
  std::string dir;             // CHORUS_TRACE_DIR; empty: no automatic dumps
  int signal = 0;              // CHORUS_TRACE_SIGNAL: SIGUSR1, SIGUSR2 or 0
  double progressSeconds = 1;  // CHORUS_PROGRESS_SECONDS; 0: no progress records
  bool report = false;         // CHORUS_REPORT=1
  // CHORUS_TRACE_DETAIL_US: a small blocking call is followed in detail (per-peer traffic and
  // arrivals) at most once per this many microseconds; 0: every call (trace/recorder.h).
  double detailMicros = 20;

  // Throws Error(kInvalidArgument) naming the variable that is wrong.
  static Settings fromEnv();
};

}  // namespace chorus::trace
