// Staging of tensors for Chorus calls: packing lists of tensors into one flat byte buffer and
// back, grouping them by dtype, and the copies that run when a call completes.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace chorus::torch_backend {

at::Tensor contiguousOf(const at::Tensor& t);
size_t totalBytes(const std::vector<at::Tensor>& list);
// Copies the tensors one after another into dst (which holds totalBytes(list)).
void packInto(uint8_t* dst, const std::vector<at::Tensor>& list);
// The reverse: fills each tensor (contiguous or not) from src.
void unpackFrom(const uint8_t* src, std::vector<at::Tensor>& list);
uint8_t* bytesOf(const at::Tensor& t);
// Tensors grouped by dtype, in the order each dtype first appears (the same on every rank that
// passes the same tensors): a reduction needs one dtype per Chorus call.
std::vector<std::vector<size_t>> byDtype(const std::vector<at::Tensor>& tensors);
std::vector<at::Tensor> pick(const std::vector<at::Tensor>& all, const std::vector<size_t>& idx);
// The copy from a staging buffer back into the caller's tensor; nothing when the operation
// worked on the tensor itself.
std::function<void()> copyBack(at::Tensor target, at::Tensor staged);
// The copy from one flat staging buffer into the caller's list of tensors.
std::function<void()> unpackInto(std::vector<at::Tensor> targets, at::Tensor flat);
at::Tensor byteBuffer(size_t bytes);

}  // namespace chorus::torch_backend
