#include "auth/key_file.h"

#include "common/errno_text.h"
#include "common/fd.h"

#include <chorus/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace chorus::auth {
namespace {

std::string octalMode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, "key file " + path + ": " + why);
}

}  // namespace

JobKey loadKeyFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO someone put there must not hang; the type is checked next.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) refuse(path, "cannot open: " + errnoText(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) refuse(path, "cannot stat: " + errnoText(errno));
  if (!S_ISREG(st.st_mode)) refuse(path, "not a regular file");
  if (st.st_uid != ::geteuid()) {
    refuse(path, "owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
                     std::to_string(::geteuid()) + ")");
  }
  if ((st.st_mode & 077) != 0) {
    refuse(path, "mode " + octalMode(st.st_mode) +
                     " lets the group or others read or write it; the key must be private "
                     "(chmod 600 " +
                     path + ")");
  }
  if (st.st_size < static_cast<off_t>(kMinKeyBytes) ||
      st.st_size > static_cast<off_t>(kMaxKeyBytes)) {
    refuse(path, std::to_string(st.st_size) + " bytes; a key has " + std::to_string(kMinKeyBytes) +
                     " to " + std::to_string(kMaxKeyBytes) +
                     " bytes (e.g. head -c 32 /dev/urandom > key)");
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd.get(), bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) refuse(path, n == 0 ? "shrank while being read" : "read: " + errnoText(errno));
    got += static_cast<size_t>(n);
  }
  return JobKey(std::move(bytes));
}

void writeKeyFile(const std::string& path, const JobKey& key) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) throw Error(ErrorCode::kSystem, "creating key file " + path + ": " + errnoText(errno));
  // The umask may only remove bits; make sure of 0600 whatever it was.
  ::fchmod(fd.get(), 0600);
  size_t done = 0;
  const auto& b = key.bytes();
  while (done < b.size()) {
    ssize_t n = ::write(fd.get(), b.data() + done, b.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error(ErrorCode::kSystem, "writing key file " + path + ": " + errnoText(errno));
    done += static_cast<size_t>(n);
  }
}

}  // namespace chorus::auth
