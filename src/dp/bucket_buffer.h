// A bucket's flat buffer. On a communicator whose ranks all share this host it is registered
// memory (Communicator::allocate), so that the bucket's all-reduce reads the peers' buffers in
// place instead of copying every byte through the shared-memory rings; elsewhere it is heap.
#pragma once

#include <chorus/communicator.hpp>

#include <cstddef>
#include <vector>

namespace chorus::dp {

// Whether every other rank of `comm` is reached through shared memory (one host): only there do
// registered buffers save anything.
bool sharesHostWithAll(const Communicator& comm);

class BucketBuffer {
 public:
  BucketBuffer() = default;
  ~BucketBuffer() { release(); }
  BucketBuffer(BucketBuffer&& o) noexcept { swap(o); }
  BucketBuffer& operator=(BucketBuffer&& o) noexcept {
    BucketBuffer(std::move(o)).swap(*this);
    return *this;
  }
  BucketBuffer(const BucketBuffer&) = delete;
  BucketBuffer& operator=(const BucketBuffer&) = delete;

  // `count` zeroed floats, registered through `comm` when `registered`. Falls back to heap
  // when the kernel refuses the shared segment (the all-reduce then takes the usual path).
  void allocate(Communicator& comm, size_t count, bool registered);
  // Frees the buffer (before the communicator that allocated it goes away); no all-reduce may
  // still use it. A registered buffer that cannot be freed is left to the communicator, which
  // reports it.
  void release() noexcept;

  float* data() const { return data_; }
  size_t size() const { return count_; }
  bool registered() const { return comm_ != nullptr; }

 private:
  void swap(BucketBuffer& o) noexcept;

  Communicator* comm_ = nullptr;  // set while data_ is registered memory from it
  float* data_ = nullptr;
  size_t count_ = 0;
  std::vector<float> heap_;
};

}  // namespace chorus::dp
