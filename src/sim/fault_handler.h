// Memory nobody may touch, and a clear message when something does: the simulator's SIGSEGV /
// SIGBUS handler names the rank that ran and what it hit (a payload in dry mode, its own stack's
// guard page) before the process ends. Process-wide, because a signal handler and
// Scratch::Reserve are plain functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chorus::sim {

constexpr size_t kPage = 4096;

// Idempotent; the handler runs on a stack of its own.
void installFaultHandler();

// `bytes` of addresses that fault on any access. Grows by reserving a new, larger range; old
// ones stay reserved so that stale addresses still fault.
uint8_t* reserveUntouchable(size_t bytes);

// Fiber stacks whose guard pages the handler reports as overflows.
void addStackRegion(const void* p, size_t bytes);
void removeStackRegion(const void* p);

// The rank whose fiber runs now (-1: none), for the handler's message.
void setRunningRank(int rank);

}  // namespace chorus::sim
