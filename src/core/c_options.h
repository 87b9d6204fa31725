// chorus_options (the C API's settings) into chorus::Options.
#pragma once

#include <chorus/chorus.h>
#include <chorus/options.hpp>

namespace chorus {

// Options::fromEnv() with the fields of `c` that are set (non-zero) on top. c may be null.
// Throws Error(kInvalidArgument) naming the field of a bad value.
Options optionsFromC(const chorus_options* c);

}  // namespace chorus
