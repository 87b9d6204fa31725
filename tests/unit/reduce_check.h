// How the reduction kernels' tests run a kernel and judge it (reduce_test.cc,
// reduce_cases_test.cc, reduce_convert_test.cc): every ISA variant this CPU has, guarded and
// misaligned buffers, in place and out of place, bit for bit.
#pragma once

#include "reduce/reduce.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace chorus::reduce::kerneltest {

// The ISA variants this CPU can run (always includes "scalar").
inline std::vector<std::string> availableIsas() {
  std::vector<std::string> isas;
  for (const char* isa : {"scalar", "avx2", "avx512"}) {
    if (setIsaForTesting(isa)) isas.emplace_back(isa);
  }
  EXPECT_TRUE(setIsaForTesting(""));
  return isas;
}

template <class T>
std::string hex(T v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  std::ostringstream out;
  out << "0x" << std::hex << bits;
  return out.str();
}

template <class T>
T loadAt(const unsigned char* p, size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof v);
  return v;
}

inline constexpr unsigned char kGuard = 0xa5;
inline constexpr size_t kPad = 64;

// `size` bytes at a chosen (mis)alignment inside a reused scratch vector, guarded on both sides.
// (Reusing the storage keeps the 1M-element cases from spending their time in page faults.)
struct Buffer {
  Buffer(std::vector<unsigned char>& scratch, const void* src, size_t bytes, size_t offset)
      : storage(scratch), off(offset), size(bytes) {
    if (storage.size() < off + size + kPad) storage.resize(off + size + kPad);
    std::memset(storage.data(), kGuard, off);
    if (size > 0) std::memcpy(storage.data() + off, src, size);
    std::memset(storage.data() + off + size, kGuard, kPad);
  }
  unsigned char* data() { return storage.data() + off; }
  bool guardsIntact() const {
    for (size_t i = 0; i < off; ++i) {
      if (storage[i] != kGuard) return false;
    }
    for (size_t i = off + size; i < off + size + kPad; ++i) {
      if (storage[i] != kGuard) return false;
    }
    return true;
  }
  bool equals(const void* bytes) const {
    return size == 0 || std::memcmp(storage.data() + off, bytes, size) == 0;
  }
  std::vector<unsigned char>& storage;
  size_t off;
  size_t size;
};

inline std::vector<unsigned char>& scratch(int i) {
  static std::vector<unsigned char> buffers[3];
  return buffers[i];
}

// Runs fn on a[0..count), b[0..count) out of place, with dst == a and with dst == b, each with
// misaligned pointers, and checks the result against expect bit for bit, that nothing outside
// [0, count) of dst was written and that the inputs that are not dst are unchanged.
template <class T>
void checkReduce(ReduceFn fn, const std::vector<T>& a, const std::vector<T>& b,
                 const std::vector<T>& expect, size_t count, const std::string& what) {
  const size_t bytes = count * sizeof(T);
  enum Mode { kOutOfPlace, kIntoA, kIntoB };
  for (Mode mode : {kOutOfPlace, kIntoA, kIntoB}) {
    const std::string where = what + " count=" + std::to_string(count) + " " +
                              (mode == kOutOfPlace ? "out of place"
                               : mode == kIntoA    ? "dst==a"
                                                   : "dst==b");
    Buffer ba(scratch(0), a.data(), bytes, mode == kIntoA ? sizeof(T) : 1);
    Buffer bb(scratch(1), b.data(), bytes, mode == kIntoB ? 0 : 3);
    Buffer bd(scratch(2), a.data(), bytes, 5);
    if (bytes > 0) std::memset(bd.data(), 0, bytes);
    Buffer& out = mode == kOutOfPlace ? bd : mode == kIntoA ? ba : bb;
    fn(out.data(), ba.data(), bb.data(), count);
    const unsigned char* got = out.data();
    if (bytes > 0 && std::memcmp(got, expect.data(), bytes) != 0) {
      for (size_t i = 0; i < count; ++i) {
        if (std::memcmp(got + i * sizeof(T), &expect[i], sizeof(T)) != 0) {
          ADD_FAILURE() << where << ": first mismatch at " << i << ": a=" << hex(a[i])
                        << " b=" << hex(b[i]) << " expected=" << hex(expect[i])
                        << " got=" << hex(loadAt<T>(got, i));
          break;
        }
      }
      return;
    }
    EXPECT_TRUE(out.guardsIntact()) << where << ": wrote outside [0, count)";
    if (mode != kIntoA) {
      EXPECT_TRUE(ba.equals(a.data())) << where << ": a changed";
      EXPECT_TRUE(ba.guardsIntact()) << where;
    }
    if (mode != kIntoB) {
      EXPECT_TRUE(bb.equals(b.data())) << where << ": b changed";
      EXPECT_TRUE(bb.guardsIntact()) << where;
    }
  }
}

class ReduceTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_TRUE(setIsaForTesting("")); }
  const std::vector<std::string> isas_ = availableIsas();
};

}  // namespace chorus::reduce::kerneltest
