// Element types that only the library itself uses: the simulator's byte-less payloads and the
// symbolic checker's elements (src/sim). They run through the same algorithm code as user data,
// but their kernels are installed at run time by whoever uses them. Users can never pass them:
// core/validate rejects every value outside the public DataType enum.
#pragma once

#include "reduce/reduce.h"

#include <chorus/types.hpp>

#include <cstddef>

namespace chorus::reduce {

// DataType values from here on are the library's own; no public call accepts them.
inline constexpr int kFirstInternalDataType = 240;

// One byte per element, never read or written: reductions, divisions and copies only tell the
// simulator how much work they stand for.
inline constexpr DataType kSimBytes = static_cast<DataType>(kFirstInternalDataType);
// A 16-byte element that records where it came from.
inline constexpr DataType kSymbolic = static_cast<DataType>(kFirstInternalDataType + 1);

// Bytes per element of any type the algorithms run on, public or internal (chorus::sizeOf knows
// the public ones only). Algorithm code uses this one, so that the simulator and the checker run
// it unchanged.
constexpr size_t elementSize(DataType t) {
  if (t == kSimBytes) return 1;
  if (t == kSymbolic) return 16;
  return sizeOf(t);
}

struct InternalKernels {
  ReduceFn reduce = nullptr;  // used for every op
  void (*divide)(void* buf, size_t count, int divisor) = nullptr;
  void (*copy)(void* dst, const void* src, size_t bytes) = nullptr;  // overlap allowed
};

// Installs the kernels of an internal type (process-wide; not thread-safe against running
// collectives of that type). Throws Error(kInvalidArgument) for a type that is not internal.
void setInternalKernels(DataType type, const InternalKernels& kernels);
// The kernels of an internal type; all null when none are installed or `type` is not internal.
const InternalKernels& internalKernels(DataType type);

// Copies `bytes` of elements of an internal type (algo::copyBytes' slow path). Throws
// Error(kInternal) when no copy kernel is installed.
void internalCopy(DataType type, void* dst, const void* src, size_t bytes);

}  // namespace chorus::reduce
