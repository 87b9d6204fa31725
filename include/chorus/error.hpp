// The one error type of the C++ API.
#pragma once

#include <chorus/export.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace chorus {

// Same values as chorus_status in chorus.h.
enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,
  kTimeout,
  kPeerFailure,
  kMismatch,
  kAborted,
  kSystem,
  kInternal,
};

CHORUS_API std::string_view toString(ErrorCode code);

class CHORUS_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace chorus
