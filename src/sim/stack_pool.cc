#include "sim/stack_pool.h"

#include "common/errno_text.h"
#include "sim/fault_handler.h"

#include <chorus/error.hpp>

#include <sys/mman.h>

#include <cerrno>
#include <string>

namespace chorus::sim {

StackPool::StackPool(int count, size_t stackBytes, bool guard) {
  stride_ = (stackBytes + kPage - 1) / kPage * kPage + (guard ? kPage : 0);
  guardBytes_ = guard ? kPage : 0;
  bytes_ = stride_ * static_cast<size_t>(count);
  // Not MAP_NORESERVE: stacks count against the commit limit like any other memory, rather
  // than raising SIGSEGV on a later page when the machine runs short.
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    throw Error(ErrorCode::kSystem, "chorus sim: cannot map " + std::to_string(bytes_) +
                                        " bytes of fiber stacks: " + errnoText(errno));
  }
  base_ = static_cast<uint8_t*>(p);
  for (int i = 0; i < count; ++i) {
    uint8_t* slot = base_ + stride_ * static_cast<size_t>(i);
    if (guard) mprotect(slot, kPage, PROT_NONE);  // the low end: stacks grow down
    free_.push_back(slot);
  }
  if (guard) addStackRegion(base_, bytes_);
}

StackPool::~StackPool() {
  removeStackRegion(base_);
  munmap(base_, bytes_);
}

boost::context::stack_context StackPool::allocate() {
  if (free_.empty()) throw Error(ErrorCode::kInternal, "chorus sim: out of fiber stacks");
  uint8_t* slot = free_.back();
  free_.pop_back();
  boost::context::stack_context sc;
  sc.size = stride_ - guardBytes_;
  sc.sp = slot + stride_;
  last_ = sc;
  return sc;
}

}  // namespace chorus::sim
