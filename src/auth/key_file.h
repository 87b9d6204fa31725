// Key files: read with the checks that keep a key private (a regular file of this user that
// nobody else may read), and written by launchers that make a key per job.
#pragma once

#include "auth/job_key.h"

#include <string>

namespace chorus::auth {

// Reads the key at `path`. Throws Error(kInvalidArgument) naming the path when it is missing,
// not a regular file, owned by another user, readable or writable by group or others (the mode
// is shown), or shorter than kMinKeyBytes / longer than kMaxKeyBytes.
JobKey loadKeyFile(const std::string& path);

// Creates `path` (which must not exist) with mode 0600 and writes the key. Throws Error(kSystem).
void writeKeyFile(const std::string& path, const JobKey& key);

}  // namespace chorus::auth
