// Which ranks never entered the call this rank is stuck in, from the progress records the ranks
// publish to the store (docs/trace-format.md). A timeout names the peer this rank waited for,
// which in a ring is often a rank that waits itself; the records say which rank is really
// missing, so every rank's error can name it first.
#pragma once

#include "trace/subject.h"

#include <cstdint>
#include <string>

namespace chorus::trace {

// "rank 2 never entered allreduce #5 (its last call: #4)" or "ranks 2, 3 never entered ..." when
// records published after this rank started call `number` show ranks that had not issued it;
// "" when the records say nothing certain (off, missing, published too early). Reads at most one
// record per rank, each with a short deadline: for the failure path only.
std::string stalledRanks(const Subject& subject, uint64_t number, const std::string& callName,
                         uint64_t callStartedUs);

}  // namespace chorus::trace
