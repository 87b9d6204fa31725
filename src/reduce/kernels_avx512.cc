// AVX-512 (F, BW, VL, DQ) kernels (compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq
// and the AVX2 flags). Only reached after dispatch.cc has checked the CPU.
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__F16C__)
#error "kernels_avx512.cc must be compiled with -mavx512f -mavx512bw -mavx512vl -mf16c"
#endif
#define CHORUS_REDUCE_VBYTES 64
#include "reduce/kernels.h"

namespace chorus::reduce {

void fillAvx512Kernels(KernelTable& table) {
  fillKernels(table);
  fillWireKernels(table);
}

}  // namespace chorus::reduce
