// Baseline x86-64 (SSE2) kernels: the reference every other variant must match bit for bit.
#define CHORUS_REDUCE_VBYTES 0
#include "reduce/kernels.h"

namespace chorus::reduce {

void fillScalarKernels(KernelTable& table) {
  fillKernels(table);
  fillWireKernels(table);
}

}  // namespace chorus::reduce
