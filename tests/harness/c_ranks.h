// Ranks as threads for tests of the C API: each thread gets its own communicator from
// chorus_comm_init_with_options over one TCP store served by the test.
#pragma once

#include <chorus/chorus.h>

#include <functional>
#include <string>

namespace chorus::testing {

// What a rank calls to record a failure (the test fails with every message, tagged by rank).
using Fail = std::function<void(const std::string&)>;

// Runs body(comm, fail) on n threads, destroys the communicators, and ADD_FAILUREs every
// message passed to fail and every failed init. Calls time out after `timeoutMs`.
void runCRanks(int n, const std::function<void(chorus_comm*, const Fail&)>& body,
               long long timeoutMs = 20000);

}  // namespace chorus::testing
