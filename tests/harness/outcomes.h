// What every rank saw of a call that is meant to fail: the error code and message of the first
// failing call, how long it took, and (optionally) what one call after it reported.
#pragma once

#include "harness/thread_ranks.h"

#include <functional>
#include <string>
#include <vector>

namespace chorus::testing {

struct Outcome {
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  ErrorCode laterCode = ErrorCode::kOk;  // of a 1-float all-reduce after the failure
  std::string laterMessage;
  double seconds = 0;
};

enum class ProbeLater : bool { kNo, kYes };

// Runs body on every rank (threads as ranks) and records what each got; with ProbeLater::kYes a
// rank whose body failed also runs one more all-reduce and records its error. A rank failing in
// any other way (not a chorus::Error) is an ADD_FAILURE.
std::vector<Outcome> outcomes(int n, const std::function<void(Communicator&)>& body,
                              Options options = testOptions(std::chrono::seconds(5)),
                              ProbeLater probe = ProbeLater::kNo);

}  // namespace chorus::testing
