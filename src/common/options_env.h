// The one reader of the library's CHORUS_* settings (docs/config.md): Options::fromEnv and the
// readers of its sub-structs are defined in options_env.cc; nothing else in src/ reads a
// CHORUS_* setting (the launchers' variables aside: core/launch_env.cc). The layers get their
// settings as arguments.
#pragma once

#include <chorus/options.hpp>

namespace chorus {

// The variables that override a tuning file's values (CHORUS_RING_BIDIR_BYTES), applied to
// `tuning` (for a tuning file given in code, as chorus_options::tuning_file).
void applyTuningOverridesFromEnv(Tuning& tuning);

}  // namespace chorus
