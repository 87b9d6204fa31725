// Registered memory: buffers allocated through Chorus (chorus_mem_alloc, Communicator::allocate)
// live in shared-memory segments of their own, so that the ranks of a host can read them in
// place (algo/in_place.h).
//
// The segments belong to the process: one registry per process maps address ranges to
// segments, and any communicator of the process finds them (a split's too). The communicator
// that allocated a buffer accounts for it: destroyed while some are still allocated, it says so
// on stderr, and they stay mapped until the process exits.
//
// A segment is a memfd (never a name in /dev/shm, so nothing is left behind when a process is
// killed): a header page, then the buffer. Peers map it through /proc/<pid>/fd/<fd>, as the
// shared-memory rings are mapped (transport/shm/segment.cc).
#pragma once

#include "algo/in_place.h"

#include <cstddef>
#include <memory>

namespace chorus::registered {

// A new segment of at least `bytes` (> 0), zero-filled, aligned to a page. Throws Error
// (kInvalidArgument for 0, kSystem when the kernel refuses).
void* allocate(size_t bytes, const void* owner);
// Frees a buffer that allocate() returned. Throws Error(kInvalidArgument) when p is not one, or
// while a collective in flight uses it (then nothing changes).
void release(void* p);
// Buffers of `owner` not freed yet: counts them, hands them to the process and returns how many
// (bytes: their total size).
size_t disown(const void* owner, size_t& bytes);
// Registered buffers currently allocated in this process.
size_t liveCount();

// Marks the registered buffers among a call's in and out (either may be null or unregistered)
// as in use until the returned handle is dropped; null when neither is registered.
std::shared_ptr<void> pin(const void* in, const void* out);

// One communicator's view: describes this process's buffers, maps its peers' (cached: a
// mapping costs a page fault per page the first time it is read).
std::unique_ptr<algo::SharedMemoryAccess> makeAccess();

}  // namespace chorus::registered
