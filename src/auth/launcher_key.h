// A launcher's key for one job: a fresh random key in a private file (mode 0600, in a directory
// of its own with mode 0700) that the launcher hands to its ranks through CHORUS_AUTH_KEY_FILE
// and removes when the job is over.
#pragma once

#include "auth/job_key.h"

#include <string>

namespace chorus::auth {

class LauncherKey {
 public:
  // Creates the directory under $TMPDIR (else /tmp) and the key file. Throws Error(kSystem).
  LauncherKey();
  ~LauncherKey();  // removes the file and its directory
  LauncherKey(const LauncherKey&) = delete;
  LauncherKey& operator=(const LauncherKey&) = delete;

  const std::string& path() const { return path_; }
  const JobKey& key() const { return key_; }

 private:
  std::string dir_;
  std::string path_;
  JobKey key_;
};

}  // namespace chorus::auth
