// What every tool's --version prints. project(... VERSION) in CMakeLists.txt is the one source of
// the version: chorus.h's macros must match it (tests/collectives/c_api_test.cc checks them).
#pragma once

#include <chorus/chorus.h>

#include <string>

namespace chorus::tools {

inline std::string libraryVersion() {
  int major = 0, minor = 0, patch = 0;
  chorus_get_version(&major, &minor, &patch);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

// "chorus-run 0.2.0 (libchorus 0.2.0)": the tool's version (the headers it was built with) and
// that of the library it runs against, which differ only when libchorus was replaced.
inline std::string versionText(const std::string& tool) {
  return tool + " " + std::to_string(CHORUS_VERSION_MAJOR) + "." +
         std::to_string(CHORUS_VERSION_MINOR) + "." + std::to_string(CHORUS_VERSION_PATCH) +
         " (libchorus " + libraryVersion() + ")";
}

}  // namespace chorus::tools
