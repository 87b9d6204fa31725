// The algorithms' local copies: memcpy for user data; the internal types (reduce/internal_types.h)
// go through their installed kernels, so the simulator can run the algorithms without touching
// any payload (its dry mode) and charge the copy to the rank instead.
#pragma once

#include "reduce/internal_types.h"

#include <chorus/types.hpp>

#include <cstring>

namespace chorus::algo {

// dst and src must not overlap.
inline void copyBytes(DataType type, void* dst, const void* src, size_t bytes) {
  if (isValid(type)) [[likely]] {
    std::memcpy(dst, src, bytes);
    return;
  }
  reduce::internalCopy(type, dst, src, bytes);
}

// dst and src may overlap.
inline void moveBytes(DataType type, void* dst, const void* src, size_t bytes) {
  if (isValid(type)) [[likely]] {
    std::memmove(dst, src, bytes);
    return;
  }
  reduce::internalCopy(type, dst, src, bytes);
}

}  // namespace chorus::algo
