#include "common/errno_text.h"

#include <cstring>

namespace chorus {
namespace {

// strerror_r comes in two flavours: the GNU one returns the text (which may not be in buf), the
// POSIX one fills buf and returns 0 on success. Overloads pick whichever the C library declares.
[[maybe_unused]] std::string fromStrerror(const char* text, const char* /*buf*/) { return text; }
[[maybe_unused]] std::string fromStrerror(int rc, const char* buf) {
  return rc == 0 ? std::string(buf) : std::string();
}

}  // namespace

std::string errnoText(int err) {
  char buf[256] = {};
  std::string text = fromStrerror(strerror_r(err, buf, sizeof(buf)), buf);
  return text.empty() ? "error " + std::to_string(err) : text;
}

}  // namespace chorus
