#include "common/env_vars.h"

#include <chorus/error.hpp>

#include <cstdlib>

namespace chorus {

std::optional<std::string> envVar(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

long long parseEnvNumber(const char* name, const std::string& text, long long lo, long long hi) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used, 10);
  } catch (...) {
    used = 0;
  }
  if (used != text.size() || v < lo || v > hi) {
    throw Error(ErrorCode::kInvalidArgument, std::string(name) + "='" + text +
                                                 "' is not a number in [" + std::to_string(lo) +
                                                 ", " + std::to_string(hi) + "]");
  }
  return v;
}

}  // namespace chorus
