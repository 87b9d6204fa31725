// When a rank exits with an error, the rank at fault is often another one, alive and stuck: the
// one that exited gave up waiting for it. The ranks' progress records (docs/trace-format.md) say
// which, so the launcher can name it before the rank that merely reported the failure.
#pragma once

#include <chorus/options.hpp>

#include <cstdint>
#include <string>

namespace chorus::launcher {

// The doctor's verdict from the progress records of the communicators published since
// launchedUs (wall-clock microseconds): "rank 2 has not issued allreduce #5 ...". "" when the
// records show no problem or cannot be read within about a second.
std::string verdictFromProgress(const std::string& storeUrl, const chorus::AuthOptions& auth,
                                int64_t launchedUs);

}  // namespace chorus::launcher
