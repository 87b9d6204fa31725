#include "heap_budget.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <new>

namespace chorus::sim_tool {
namespace {

size_t g_heapBytes = 0;
size_t g_heapLimit = static_cast<size_t>(-1);
size_t g_heapPeak = 0;

void* countedAlloc(size_t n, size_t align) {
  if (n == 0) n = 1;
  // Past the budget large allocations fail (the run that needs them is given up); small ones may
  // go a little further, so that unwinding and error messages still work.
  constexpr size_t kSlack = 256u << 20;
  if (g_heapBytes + n > g_heapLimit && (n >= 4096 || g_heapBytes + n > g_heapLimit + kSlack)) {
    return nullptr;
  }
  void* p = align > alignof(std::max_align_t)
                ? std::aligned_alloc(align, (n + align - 1) / align * align)
                : std::malloc(n);
  if (p == nullptr) return nullptr;
  g_heapBytes += malloc_usable_size(p);
  g_heapPeak = std::max(g_heapPeak, g_heapBytes);
  return p;
}
void countedFree(void* p) noexcept {
  if (p == nullptr) return;
  g_heapBytes -= malloc_usable_size(p);
  std::free(p);
}

}  // namespace

void setHeapLimit(size_t bytes) { g_heapLimit = bytes; }
size_t heapBytes() { return g_heapBytes; }
size_t heapPeak() { return g_heapPeak; }
void resetHeapPeak() { g_heapPeak = g_heapBytes; }

}  // namespace chorus::sim_tool

using chorus::sim_tool::countedAlloc;
using chorus::sim_tool::countedFree;

void* operator new(size_t n) {
  if (void* p = countedAlloc(n, 0)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) {
  if (void* p = countedAlloc(n, 0)) return p;
  throw std::bad_alloc();
}
void* operator new(size_t n, std::align_val_t a) {
  if (void* p = countedAlloc(n, static_cast<size_t>(a))) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n, std::align_val_t a) {
  if (void* p = countedAlloc(n, static_cast<size_t>(a))) return p;
  throw std::bad_alloc();
}
void* operator new(size_t n, const std::nothrow_t&) noexcept { return countedAlloc(n, 0); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return countedAlloc(n, 0); }
void operator delete(void* p) noexcept { countedFree(p); }
void operator delete[](void* p) noexcept { countedFree(p); }
void operator delete(void* p, size_t) noexcept { countedFree(p); }
void operator delete[](void* p, size_t) noexcept { countedFree(p); }
void operator delete(void* p, std::align_val_t) noexcept { countedFree(p); }
void operator delete[](void* p, std::align_val_t) noexcept { countedFree(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { countedFree(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { countedFree(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { countedFree(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { countedFree(p); }
