// Picks the reduction kernels for the running CPU, once, and hands out function pointers.
//
// The three kernel tables come from TUs compiled with different -m flags (kernels_scalar.cc,
// kernels_avx2.cc, kernels_avx512.cc). This file is compiled for baseline x86-64 and only calls
// into a table's TU after __builtin_cpu_supports (which also checks that the OS saves the wider
// registers) has said the CPU can run it. After that, reduceFn() is a table lookup: the kernels
// themselves never branch on the ISA.
#include <chorus/error.hpp>

#include <cpuid.h>

#include <atomic>
#include <string>

#include "reduce/internal_types.h"
#include "reduce/kernel_table.h"
#include "reduce/reduce.h"
#include "reduce/wire.h"

namespace chorus::reduce {
namespace {

enum class Isa { kScalar, kAvx2, kAvx512 };

struct IsaKernels {
  std::string_view name;
  KernelTable table;
};

// F16C straight from CPUID (not every compiler's __builtin_cpu_supports knows "f16c"); the
// OS support for YMM state that it needs is part of the "avx2" check.
bool cpuHasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

bool cpuSupports(Isa isa) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("bmi2") && cpuHasF16c();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return avx2;
    case Isa::kAvx512:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }
  return false;
}

IsaKernels build(std::string_view name, void (*fill)(KernelTable&)) {
  IsaKernels k{name, {}};
  fill(k.table);
  return k;
}

// Null if the CPU cannot run `isa`. Each table is built on first use (thread-safe statics).
const IsaKernels* kernelsFor(Isa isa) {
  if (!cpuSupports(isa)) return nullptr;
  switch (isa) {
    case Isa::kScalar: {
      static const IsaKernels k = build("scalar", &fillScalarKernels);
      return &k;
    }
    case Isa::kAvx2: {
      static const IsaKernels k = build("avx2", &fillAvx2Kernels);
      return &k;
    }
    case Isa::kAvx512: {
      static const IsaKernels k = build("avx512", &fillAvx512Kernels);
      return &k;
    }
  }
  return nullptr;
}

const IsaKernels* best() {
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
    if (const IsaKernels* k = kernelsFor(isa)) return k;
  }
  return kernelsFor(Isa::kScalar);
}

std::atomic<const IsaKernels*> g_current{nullptr};

const IsaKernels& current() {
  const IsaKernels* k = g_current.load(std::memory_order_acquire);
  if (k != nullptr) [[likely]]
    return *k;
  const IsaKernels* chosen = best();
  // Another thread may have won (or setIsaForTesting ran): keep what is there.
  if (g_current.compare_exchange_strong(k, chosen, std::memory_order_acq_rel)) return *chosen;
  return *k;
}

}  // namespace

ReduceFn reduceFn(DataType type, ReduceOp op) {
  if (!isValid(type) || !isValid(op)) [[unlikely]] {
    return isValid(op) ? internalKernels(type).reduce : nullptr;
  }
  return current().table.reduce[static_cast<int>(type)][static_cast<int>(op)];
}

void divide(void* buf, size_t count, DataType type, int divisor) {
  const bool internal = !isValid(type) && internalKernels(type).divide != nullptr;
  if (!isValid(type) && !internal) {
    throw Error(ErrorCode::kInvalidArgument,
                "reduce::divide: invalid data type " + std::to_string(static_cast<int>(type)));
  }
  if (divisor == 0) throw Error(ErrorCode::kInvalidArgument, "reduce::divide: divisor is 0");
  if (internal) [[unlikely]] {
    internalKernels(type).divide(buf, count, divisor);
    return;
  }
  if (count == 0) return;
  current().table.divide[static_cast<int>(type)](buf, count, divisor);
}

const WireKernels& wireKernels(WireFormat w) {
  if (w == WireFormat::kNative || !isValid(w)) [[unlikely]] {
    throw Error(ErrorCode::kInternal,
                "no wire kernels for format " + std::to_string(static_cast<int>(w)));
  }
  return current().table.wire[static_cast<int>(w)];
}

void wireEncode(WireFormat w, void* wire, const float* src, size_t count) {
  if (count > 0) wireKernels(w).encode(wire, src, count);
}
void wireDecode(WireFormat w, float* dst, const void* wire, size_t count) {
  if (count > 0) wireKernels(w).decode(dst, wire, count);
}
void wireDecodeAdd(WireFormat w, float* dst, const float* mine, const void* wire, size_t count) {
  if (count > 0) wireKernels(w).decodeAdd(dst, mine, wire, count);
}

std::string_view isaName() { return current().name; }

bool setIsaForTesting(std::string_view isa) {
  const IsaKernels* k = nullptr;
  if (isa.empty() || isa == "auto") {
    k = best();
  } else if (isa == "scalar") {
    k = kernelsFor(Isa::kScalar);
  } else if (isa == "avx2") {
    k = kernelsFor(Isa::kAvx2);
  } else if (isa == "avx512") {
    k = kernelsFor(Isa::kAvx512);
  }
  if (k == nullptr) return false;
  g_current.store(k, std::memory_order_release);
  return true;
}

}  // namespace chorus::reduce
