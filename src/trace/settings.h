// The recorder's settings: chorus::TraceOptions (Options::trace, read from the environment by
// Options::fromEnv), by the name the recorder's files use.
#pragma once

#include <chorus/options.hpp>

namespace chorus::trace {

using Settings = TraceOptions;

}  // namespace chorus::trace
