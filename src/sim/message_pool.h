// Messages in flight between virtual ranks, from a pool that stops allocating once it has grown
// to the largest number in flight.
#pragma once

#include "common/op_desc.h"
#include "sim/sim_time.h"
#include "transport/transport.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace chorus::sim {

struct Message {
  Message* next = nullptr;
  transport::Request* send = nullptr;  // kReal: the sender's request, completed when matched
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  Time arrival = 0;
  OpDesc op;
  bool opBegun = false;
  uint32_t step = 0;
};

// No allocation per message once the pool has grown to the largest number in flight.
class MessagePool {
 public:
  Message* get() {
    if (free_ == nullptr) grow();
    Message* m = free_;
    free_ = m->next;
    m->next = nullptr;
    return m;
  }
  void put(Message* m) {
    m->next = free_;
    free_ = m;
  }
  void reset() {
    free_ = nullptr;
    for (auto& chunk : chunks_) {
      for (size_t i = 0; i < kChunk; ++i) put(&chunk[i]);
    }
  }

 private:
  static constexpr size_t kChunk = 4096;
  void grow() {
    chunks_.emplace_back(new Message[kChunk]);
    for (size_t i = 0; i < kChunk; ++i) put(&chunks_.back()[i]);
  }
  std::vector<std::unique_ptr<Message[]>> chunks_;
  Message* free_ = nullptr;
};

}  // namespace chorus::sim
