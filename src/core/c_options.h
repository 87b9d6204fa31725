// chorus_options (the C API's settings) into chorus::Options.
#pragma once

#include <chorus/chorus.h>
#include <chorus/options.hpp>

namespace chorus {

// Options::fromEnv() with the fields of `c` that are set (non-zero) on top. c may be null.
// Throws Error(kInvalidArgument) naming the field of a bad value.
Options optionsFromC(const chorus_options* c);

// The variables that override a tuning file's values (CHORUS_RING_BIDIR_BYTES), applied to
// `tuning` (core/options.cc, the one place that reads CHORUS_* settings).
void applyTuningOverridesFromEnv(Tuning& tuning);

}  // namespace chorus
