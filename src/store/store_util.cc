#include "store/store_util.h"

#include "common/errno_text.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>

namespace chorus::store {

int64_t parseCounter(const std::string& key, const Store::Bytes& value) {
  const char* first = reinterpret_cast<const char*>(value.data());
  const char* last = first + value.size();
  int64_t out = 0;
  auto [ptr, ec] = std::from_chars(first, last, out);
  if (value.empty() || ec != std::errc() || ptr != last) {
    throw Error(ErrorCode::kInvalidArgument,
                "store: add on key " + quoteKey(key) + " whose value is not a decimal integer");
  }
  return out;
}

Store::Bytes formatCounter(int64_t value) {
  char buf[32];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  (void)ec;
  return Store::Bytes(reinterpret_cast<uint8_t*>(buf), reinterpret_cast<uint8_t*>(ptr));
}

int64_t addCounter(const std::string& key, int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    throw Error(ErrorCode::kInvalidArgument, "store: add on key " + quoteKey(key) + " overflows");
  }
  return out;
}

void throwWaitTimeout(std::string_view where, std::string_view what,
                      std::chrono::milliseconds timeout) {
  throw Error(ErrorCode::kTimeout, "store: timed out after " + std::to_string(timeout.count()) +
                                       " ms waiting for " + std::string(what) + " in " +
                                       std::string(where));
}

std::string quoteKey(std::string_view key) {
  constexpr size_t kMaxShown = 200;
  static const char* kHex = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < key.size() && i < kMaxShown; ++i) {
    unsigned char c = static_cast<unsigned char>(key[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (key.size() > kMaxShown) out += "...";
  out += "'";
  return out;
}

void throwSystem(const std::string& what, int err) {
  throw Error(ErrorCode::kSystem, what + ": " + errnoText(err));
}

}  // namespace chorus::store
