// The sweep's buffers: on the heap, or (--registered) registered memory from
// Communicator::allocate, which the ranks of a host read in place.
#pragma once

#include <chorus/communicator.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus::bench {

class BenchMemory {
 public:
  BenchMemory(Communicator& comm, size_t bytes, bool registered) : comm_(comm), bytes_(bytes) {
    if (registered) {
      data_ = static_cast<uint8_t*>(comm.allocate(bytes));
    } else {
      heap_.resize(bytes);
      data_ = heap_.data();
    }
  }
  BenchMemory(const BenchMemory&) = delete;
  BenchMemory& operator=(const BenchMemory&) = delete;
  ~BenchMemory() {
    if (heap_.empty()) comm_.deallocate(data_);
  }
  uint8_t* data() { return data_; }
  uint8_t* begin() { return data_; }
  uint8_t* end() { return data_ + bytes_; }
  size_t size() const { return bytes_; }

 private:
  Communicator& comm_;
  size_t bytes_;
  uint8_t* data_ = nullptr;
  std::vector<uint8_t> heap_;
};

}  // namespace chorus::bench
