// AVX2 + F16C kernels (this file is compiled with -mavx2 -mfma -mf16c -mbmi2). Only reached
// after dispatch.cc has checked the CPU.
#if !defined(__AVX2__) || !defined(__F16C__)
#error "kernels_avx2.cc must be compiled with -mavx2 -mf16c (see src/CMakeLists.txt)"
#endif
#define CHORUS_REDUCE_VBYTES 32
#include "reduce/kernels.h"

namespace chorus::reduce {

void fillAvx2Kernels(KernelTable& table) {
  fillKernels(table);
  fillWireKernels(table);
}

}  // namespace chorus::reduce
