// Reading an enum a C caller passed: C callers may pass any int as an enum (e.g.
// (chorus_dtype)99), and in C++ merely loading such a value as the enum type is undefined, so the
// bytes are read as an int and range-checked by the caller.
#pragma once

#include <cstring>

namespace chorus {

template <class E>
int rawEnum(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof(v));
  return v;
}

}  // namespace chorus
