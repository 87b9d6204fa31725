#include "dp/bucket_buffer.h"

#include <chorus/error.hpp>

#include <utility>

namespace chorus::dp {

bool sharesHostWithAll(const Communicator& comm) {
  if (comm.size() < 2) return false;
  for (int q = 0; q < comm.size(); ++q) {
    if (q != comm.rank() && comm.transportTo(q) != "shm") return false;
  }
  return true;
}

void BucketBuffer::allocate(Communicator& comm, size_t count, bool registered) {
  release();
  count_ = count;
  if (count == 0) return;
  if (registered) {
    try {
      data_ = static_cast<float*>(comm.allocate(count * sizeof(float)));  // zero-filled
      comm_ = &comm;
      return;
    } catch (const Error&) {  // no shared segment (limits, memory): heap works, only slower
    }
  }
  heap_.assign(count, 0.0f);
  data_ = heap_.data();
}

void BucketBuffer::release() noexcept {
  if (comm_ != nullptr) {
    try {
      comm_->deallocate(data_);
    } catch (...) {  // still in use: the communicator keeps it and says so at its end
    }
  }
  comm_ = nullptr;
  data_ = nullptr;
  count_ = 0;
  heap_.clear();
  heap_.shrink_to_fit();
}

void BucketBuffer::swap(BucketBuffer& o) noexcept {
  std::swap(comm_, o.comm_);
  std::swap(data_, o.data_);
  std::swap(count_, o.count_);
  std::swap(heap_, o.heap_);  // the vector's storage moves with it: data_ stays valid
}

}  // namespace chorus::dp
