#include "error_text.h"

#include <chorus/error.hpp>

#include <string>

namespace chorus::torch_backend {

std::exception_ptr forTorch(std::exception_ptr error) {
  if (!error) return error;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kTimeout) return error;
    // The same type and code, so callers that tell errors apart by code still can.
    return std::make_exception_ptr(
        Error(e.code(), std::string("chorus backend: Timed out in ") + e.what()));
  } catch (...) {
    return error;
  }
}

}  // namespace chorus::torch_backend
