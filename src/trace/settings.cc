#include "trace/settings.h"

#include "common/env_vars.h"

#include <chorus/error.hpp>

#include <csignal>
#include <cstdlib>

namespace chorus::trace {

Settings Settings::fromEnv() {
  Settings s;
  if (auto v = envVar("CHORUS_TRACE_ENTRIES")) {
    s.entries = static_cast<size_t>(parseEnvNumber("CHORUS_TRACE_ENTRIES", *v, 0, 1 << 24));
  }
  if (auto v = envVar("CHORUS_TRACE_DIR")) s.dir = *v;
  if (auto v = envVar("CHORUS_TRACE_SIGNAL")) {
    if (*v == "USR1" || *v == "SIGUSR1") {
      s.signal = SIGUSR1;
    } else if (*v == "USR2" || *v == "SIGUSR2") {
      s.signal = SIGUSR2;
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  "CHORUS_TRACE_SIGNAL='" + *v + "' is not USR1 or USR2");
    }
  }
  if (auto v = envVar("CHORUS_PROGRESS_SECONDS")) {
    char* end = nullptr;
    double d = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(d >= 0) || d > 86400) {
      throw Error(ErrorCode::kInvalidArgument,
                  "CHORUS_PROGRESS_SECONDS='" + *v + "' is not a number of seconds in [0, 86400]");
    }
    s.progressSeconds = d;
  }
  if (auto v = envVar("CHORUS_REPORT")) s.report = *v == "1";
  if (auto v = envVar("CHORUS_TRACE_DETAIL_US")) {
    s.detailMicros = static_cast<double>(parseEnvNumber("CHORUS_TRACE_DETAIL_US", *v, 0, 60000000));
  }
  return s;
}

}  // namespace chorus::trace
