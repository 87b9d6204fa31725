// Reading one environment variable: unset and empty are the same, and a number out of range or
// with trailing text is an error that names the variable.
#pragma once

#include <optional>
#include <string>

namespace chorus {

std::optional<std::string> envVar(const char* name);

// Throws Error(kInvalidArgument): "NAME='text' is not a number in [lo, hi]".
long long parseEnvNumber(const char* name, const std::string& text, long long lo, long long hi);

}  // namespace chorus
