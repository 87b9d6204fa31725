// The per-ISA tables of reduction kernels (internal to src/reduce/).
#pragma once

#include "reduce/reduce.h"

#include <chorus/types.hpp>

#include <cstddef>

namespace chorus::reduce {

// buf[i] = buf[i] / divisor for one data type.
using DivideFn = void (*)(void* buf, size_t count, int divisor);

// f32 <-> wire format (reduce/wire.h); null for kNative.
struct WireKernels {
  void (*encode)(void* wire, const float* src, size_t count);
  void (*decode)(float* dst, const void* wire, size_t count);
  void (*decodeAdd)(float* dst, const float* mine, const void* wire, size_t count);
};

struct KernelTable {
  ReduceFn reduce[kNumDataTypes][kNumReduceOps];
  DivideFn divide[kNumDataTypes];
  WireKernels wire[kNumWireFormats];
};

// Each is defined in its own TU (kernels_<isa>.cc), compiled for that instruction set: only call
// fillAvx2Kernels / fillAvx512Kernels once the CPU is known to support it (see dispatch.cc).
void fillScalarKernels(KernelTable& table);
void fillAvx2Kernels(KernelTable& table);
void fillAvx512Kernels(KernelTable& table);

}  // namespace chorus::reduce
