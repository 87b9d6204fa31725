// Collectives that read the peers' buffers in place: when every rank of a one-host group passed
// buffers allocated through Chorus (registered memory, core/registered_memory.h), each rank maps
// the others' buffers and reduces or copies straight from them, with no ring in between.
#pragma once

#include "algo/group.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace chorus::algo {

// Where a registered buffer lives, as its owner describes it to the ranks of its host: the
// segment (owner's process, its descriptor there, a serial number unique in that process, the
// segment's size and its address in the owner) and the buffer's offset in it. Sent as is.
struct SharedRef {
  uint64_t pid = 0;
  uint64_t fd = 0;
  uint64_t serial = 0;  // 0: not registered
  uint64_t segmentBytes = 0;
  uint64_t base = 0;
  uint64_t offset = 0;
};

// What the in-place collectives need from the library: which buffers are registered, and the
// peers' buffers mapped into this process. Implemented by core/registered_memory.cc; the
// simulator has none (Group::shared is null there).
class SharedMemoryAccess {
 public:
  virtual ~SharedMemoryAccess() = default;
  // Whether [p, p + bytes) lies inside one registered segment; fills ref if so.
  virtual bool describe(const void* p, size_t bytes, SharedRef& ref) const = 0;
  // The start of the buffer `ref` names (from rank `peer`), mapped into this process; null when
  // this process cannot map it (the error goes to `why`).
  virtual uint8_t* map(int peer, const SharedRef& ref, std::string& why) = 0;
};

// Calls from this size (bytes of one rank's contribution; 1 MiB) may run in place: below it the
// exchange of buffer descriptions, which a call that falls back pays too, costs more than the
// copies it saves. The same on every rank.
size_t inPlaceMinBytes();
// Tests: a smaller threshold, process-wide (0: back to the default).
void setInPlaceMinBytesForTesting(size_t bytes);

// Runs `a` in place when g.shared is set, the group is on one host, the collective is one with
// an in-place form and the size is at least inPlaceMinBytes(). Every rank then exchanges its
// buffers' descriptions (so every rank decides the same way); returns false, having sent only
// those descriptions, when some rank's buffer is not registered or cannot be mapped: the caller
// then runs the usual algorithm.
bool runInPlace(const Group& g, const Args& a);

// Calls of this process that ran in place so far (all communicators): for tests.
uint64_t inPlaceRunCount();

}  // namespace chorus::algo
