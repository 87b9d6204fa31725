#include "reduce/internal_types.h"

#include <chorus/error.hpp>

#include <string>

namespace chorus::reduce {
namespace {

constexpr int kInternalTypes = 2;
InternalKernels g_kernels[kInternalTypes];

int slotOf(DataType type) { return static_cast<int>(type) - kFirstInternalDataType; }

}  // namespace

void setInternalKernels(DataType type, const InternalKernels& kernels) {
  const int slot = slotOf(type);
  if (slot < 0 || slot >= kInternalTypes) {
    throw Error(ErrorCode::kInvalidArgument,
                "reduce::setInternalKernels: " + std::to_string(static_cast<int>(type)) +
                    " is not an internal data type");
  }
  g_kernels[slot] = kernels;
}

const InternalKernels& internalKernels(DataType type) {
  static const InternalKernels kNone;
  const int slot = slotOf(type);
  return slot >= 0 && slot < kInternalTypes ? g_kernels[slot] : kNone;
}

void internalCopy(DataType type, void* dst, const void* src, size_t bytes) {
  const InternalKernels& k = internalKernels(type);
  if (k.copy == nullptr) {
    throw Error(ErrorCode::kInternal,
                "copy of data type " + std::to_string(static_cast<int>(type)) + " without kernels");
  }
  k.copy(dst, src, bytes);
}

}  // namespace chorus::reduce
