// chorus-train: data-parallel training of Fashion-MNIST with LibTorch, gradients averaged by
// chorus::dp through TorchReplica. Run under chorus-run; see docs/dp.md.
#include <malloc.h>

#include <cstdio>
#include <exception>

#include "options.h"
#include "training.h"

// LibTorch allocates and frees every activation and gradient each step. With glibc's defaults the
// large ones go back to the kernel (munmap, heap trim) and fault in again, page by page, on the
// next step; on virtual machines where a page fault is expensive that tripled the CNN's
// forward+backward time. Keeping the freed memory in the heap makes later steps fault-free.
static void keepFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum: blocks below it come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // and the heap top is not handed back below 1 GiB
}

int main(int argc, char** argv) {
  keepFreedMemory();
  chorus::train::TrainOptions o;
  if (int rc = chorus::train::parseOptions(argc, argv, o); rc >= 0) return rc;
  try {
    return chorus::train::Training(o).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-train: %s\n", e.what());
    return 1;
  }
}
