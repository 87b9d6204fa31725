// The algorithm a communicator chose for recent call shapes. The choice is a pure function of
// the call's shape and of what stays fixed for the communicator (size, placement, options), and
// working it out (the cost model of every candidate, a sort, two allocations) took about a tenth
// of the CPU of an 8-byte shared-memory all-reduce. Slots are single 64-bit words, so threads
// that issue calls at once share the memo without a lock; a lost update only costs a recomputation.
#pragma once

#include "common/op_desc.h"

#include <chorus/types.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>

namespace chorus {

class ChoiceMemo {
 public:
  std::optional<AlgorithmId> find(CollectiveKind kind, uint64_t bytes, DataType dtype,
                                  WireFormat wire) const {
    const uint64_t k = key(kind, bytes, dtype, wire);
    if (k == 0) return std::nullopt;
    const uint64_t word = slots_[slotOf(k)].load(std::memory_order_relaxed);
    if ((word & kKeyMask) != k) return std::nullopt;
    return static_cast<AlgorithmId>((word >> kAlgoShift) & 0xff);
  }
  void remember(CollectiveKind kind, uint64_t bytes, DataType dtype, WireFormat wire,
                AlgorithmId algo) {
    const uint64_t k = key(kind, bytes, dtype, wire);
    if (k == 0) return;
    slots_[slotOf(k)].store(k | (static_cast<uint64_t>(algo) << kAlgoShift),
                            std::memory_order_relaxed);
  }

 private:
  static constexpr int kAlgoShift = 52;
  static constexpr uint64_t kValid = uint64_t{1} << 63;
  static constexpr uint64_t kKeyMask = kValid | ((uint64_t{1} << kAlgoShift) - 1);
  // bytes in bits 0-39, kind 40-44, dtype 45-48, wire 49-51, the valid bit 63; 0: not memoised
  // (a call of 1 TiB or more).
  static uint64_t key(CollectiveKind kind, uint64_t bytes, DataType dtype, WireFormat wire) {
    if (bytes >= (uint64_t{1} << 40)) return 0;
    return kValid | bytes | (static_cast<uint64_t>(kind) & 0x1f) << 40 |
           (static_cast<uint64_t>(dtype) & 0xf) << 45 | (static_cast<uint64_t>(wire) & 0x7) << 49;
  }
  static size_t slotOf(uint64_t k) { return (k * 0x9E3779B97F4A7C15ull) >> 61; }

  std::array<std::atomic<uint64_t>, 8> slots_{};
};

}  // namespace chorus
