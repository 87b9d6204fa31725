// The version this library was built as, from chorus.h's macros (which a test keeps equal to the
// project's): for the lines a communicator prints.
#pragma once

#include <chorus/chorus.h>

#include <string>

namespace chorus {

inline std::string libraryVersion() {
  return std::to_string(CHORUS_VERSION_MAJOR) + "." + std::to_string(CHORUS_VERSION_MINOR) + "." +
         std::to_string(CHORUS_VERSION_PATCH);
}

}  // namespace chorus
