#include <chorus/error.hpp>

namespace chorus {

std::string_view toString(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kPeerFailure:
      return "peer failure";
    case ErrorCode::kMismatch:
      return "mismatched collective";
    case ErrorCode::kAborted:
      return "aborted";
    case ErrorCode::kSystem:
      return "system error";
    case ErrorCode::kInternal:
      return "internal error";
  }
  return "unknown error";
}

}  // namespace chorus
