// The process's heap, counted: this file replaces the global operator new and delete, so every
// allocation of chorus-sim (the algorithms' plans included) goes through a budget. The algorithms
// plan per rank (the ring: every step of every segment up front), so some algorithm and
// world-size pairs need more memory than a machine has; past the budget an allocation throws
// std::bad_alloc, which fails that run alone with a clear message.
#pragma once

#include <cstddef>

namespace chorus::sim_tool {

// Large allocations past `bytes` fail; small ones may go a little further, so that unwinding and
// error messages still work. Unlimited until set.
void setHeapLimit(size_t bytes);
size_t heapBytes();  // in use now
size_t heapPeak();   // the most in use since the last resetHeapPeak()
void resetHeapPeak();

}  // namespace chorus::sim_tool
