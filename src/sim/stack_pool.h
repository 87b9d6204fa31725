// Fiber stacks: one mapping for all ranks, with guard pages while that is affordable.
#pragma once

#include <boost/context/stack_context.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus::sim {

#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kDefaultStackBytes = 512 * 1024;
#else
constexpr size_t kDefaultStackBytes = 64 * 1024;
#endif
// One guard mapping per rank costs two memory mappings (the kernel allows about 65k).
constexpr int kMaxGuardedRanks = 4096;

class StackPool {
 public:
  StackPool(int count, size_t stackBytes, bool guard);
  ~StackPool();
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  boost::context::stack_context allocate();
  // The stack handed out last (AddressSanitizer is told about each fiber's stack).
  const boost::context::stack_context& last() const { return last_; }
  void deallocate(boost::context::stack_context& sc) noexcept {
    free_.push_back(static_cast<uint8_t*>(sc.sp) - stride_);
  }

 private:
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0, stride_ = 0, guardBytes_ = 0;
  std::vector<uint8_t*> free_;
  boost::context::stack_context last_;
};

// The stack allocator a fiber is created with.
struct PooledStack {
  StackPool* pool;
  boost::context::stack_context allocate() { return pool->allocate(); }
  void deallocate(boost::context::stack_context& sc) noexcept { pool->deallocate(sc); }
};

}  // namespace chorus::sim
