// Which deadline a group's collectives get: the group's timeout (init_process_group / new_group
// timeout=, 30 minutes by default) and CHORUS_TIMEOUT (chorus-run --timeout sets it) are both
// limits the user asked for, so the shorter applies. Rank 0 of the group says so on stderr when
// the two differ (once per process for each pair of values).
#pragma once

#include <chrono>
#include <string>

namespace chorus::torch_backend {

// groupTimeout: the group's; group: its description for the message; rank: this rank in it.
// Throws Error (kInvalidArgument) for a malformed CHORUS_TIMEOUT.
std::chrono::milliseconds chooseTimeout(std::chrono::milliseconds groupTimeout,
                                        const std::string& group, int rank);

}  // namespace chorus::torch_backend
