// The dumps as a Chrome trace (Trace Event Format: opens in Perfetto and chrome://tracing).
#pragma once

#include <nlohmann/json.hpp>

#include <vector>

#include "trace.h"

namespace chorus::doctor {

// One process per communicator, one thread (track) per rank; per call a complete event named
// "allreduce #5" from its start to its end (the dump's time while still running), with the wait
// for the last peer's first arrival as a nested slice, and the time queued before the start as
// a slice of its own. Times are microseconds from the earliest call.
nlohmann::json chromeTrace(const std::vector<Dump>& dumps);

}  // namespace chorus::doctor
