// The tuning-file parser over text, so that it can be checked without a file.
#pragma once

#include <chorus/options.hpp>

#include <string>
#include <string_view>

namespace chorus {

// Parses the contents of a tuning file (format: Tuning::fromFile). `source` names the file in
// errors: "tuning file <source>:<line>: <what is wrong>".
Tuning parseTuningText(std::string_view text, const std::string& source);

}  // namespace chorus
