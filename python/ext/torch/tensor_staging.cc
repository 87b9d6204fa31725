#include "tensor_staging.h"

#include "tensor_args.h"

#include <algorithm>
#include <cstring>

namespace chorus::torch_backend {

at::Tensor contiguousOf(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

size_t totalBytes(const std::vector<at::Tensor>& list) {
  size_t n = 0;
  for (const auto& t : list) n += byteCount(t);
  return n;
}

void packInto(uint8_t* dst, const std::vector<at::Tensor>& list) {
  for (const auto& t : list) {
    const at::Tensor c = contiguousOf(t);
    const size_t n = byteCount(c);
    if (n != 0) std::memcpy(dst, c.data_ptr(), n);
    dst += n;
  }
}

void unpackFrom(const uint8_t* src, std::vector<at::Tensor>& list) {
  for (auto& t : list) {
    const size_t n = byteCount(t);
    if (n == 0) continue;
    if (t.is_contiguous()) {
      std::memcpy(t.data_ptr(), src, n);
    } else {
      t.copy_(at::from_blob(const_cast<uint8_t*>(src), t.sizes(), t.options()));
    }
    src += n;
  }
}

uint8_t* bytesOf(const at::Tensor& t) { return static_cast<uint8_t*>(t.data_ptr()); }

std::vector<std::vector<size_t>> byDtype(const std::vector<at::Tensor>& tensors) {
  std::vector<std::vector<size_t>> groups;
  std::vector<at::ScalarType> types;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto t = tensors[i].scalar_type();
    const auto it = std::find(types.begin(), types.end(), t);
    if (it == types.end()) {
      types.push_back(t);
      groups.push_back({i});
    } else {
      groups[static_cast<size_t>(it - types.begin())].push_back(i);
    }
  }
  return groups;
}

std::vector<at::Tensor> pick(const std::vector<at::Tensor>& all, const std::vector<size_t>& idx) {
  std::vector<at::Tensor> out;
  out.reserve(idx.size());
  for (auto i : idx) out.push_back(all[i]);
  return out;
}

std::function<void()> copyBack(at::Tensor target, at::Tensor staged) {
  if (staged.is_same(target)) return nullptr;
  return [target, staged]() mutable { target.copy_(staged); };
}

std::function<void()> unpackInto(std::vector<at::Tensor> targets, at::Tensor flat) {
  return [targets, flat]() mutable { unpackFrom(bytesOf(flat), targets); };
}

at::Tensor byteBuffer(size_t bytes) {
  return at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte));
}

}  // namespace chorus::torch_backend
