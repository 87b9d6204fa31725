#include "auth/launcher_key.h"

#include "auth/key_file.h"
#include "common/errno_text.h"

#include <chorus/error.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

namespace chorus::auth {

LauncherKey::LauncherKey() : key_(JobKey::random()) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/chorus-key-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  if (::mkdtemp(name.data()) == nullptr) {  // mode 0700
    throw Error(ErrorCode::kSystem,
                "creating a directory for the job key (" + pattern + "): " + errnoText(errno));
  }
  dir_ = name.data();
  path_ = dir_ + "/job.key";
  try {
    writeKeyFile(path_, key_);
  } catch (...) {
    ::rmdir(dir_.c_str());
    throw;
  }
}

LauncherKey::~LauncherKey() {
  ::unlink(path_.c_str());
  ::rmdir(dir_.c_str());
}

}  // namespace chorus::auth
