// The queues between virtual ranks: one channel per ordered pair (src, dst) holds the messages
// sent and not yet received, and the receives posted and not yet matched, each in order.
#pragma once

#include "sim/message_pool.h"
#include "transport/transport.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace chorus::sim {

struct Channel {
  int src = 0, dst = 0;
  Message* head = nullptr;  // sent, not yet received, in send order
  Message* tail = nullptr;
  transport::Request* recvHead = nullptr;  // posted receives not yet matched, in post order
  transport::Request* recvTail = nullptr;
};

// (src, dst) -> channel, open addressing: O(1) without a dense N x N table.
class ChannelMap {
 public:
  ChannelMap() { rehash(1024); }
  Channel& get(int src, int dst) {
    const uint64_t key = key_(src, dst);
    size_t i = slot(key);
    while (keys_[i] != 0) {
      if (keys_[i] == key) return *vals_[i];
      i = (i + 1) & mask_;
    }
    if ((count_ + 1) * 2 > keys_.size()) {
      rehash(keys_.size() * 2);
      return get(src, dst);
    }
    store_.emplace_back();
    Channel& c = store_.back();
    c.src = src;
    c.dst = dst;
    keys_[i] = key;
    vals_[i] = &c;
    ++count_;
    return c;
  }
  std::deque<Channel>& all() { return store_; }

 private:
  static uint64_t key_(int src, int dst) {
    return ((static_cast<uint64_t>(static_cast<uint32_t>(src)) << 32) |
            static_cast<uint32_t>(dst)) +
           1;  // 0 marks an empty slot
  }
  size_t slot(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
  }
  void rehash(size_t capacity) {
    std::vector<uint64_t> oldKeys = std::move(keys_);
    std::vector<Channel*> oldVals = std::move(vals_);
    keys_.assign(capacity, 0);
    vals_.assign(capacity, nullptr);
    mask_ = capacity - 1;
    shift_ = 64 - __builtin_ctzll(capacity);
    for (size_t j = 0; j < oldKeys.size(); ++j) {
      if (oldKeys[j] == 0) continue;
      size_t i = slot(oldKeys[j]);
      while (keys_[i] != 0) i = (i + 1) & mask_;
      keys_[i] = oldKeys[j];
      vals_[i] = oldVals[j];
    }
  }
  std::vector<uint64_t> keys_;
  std::vector<Channel*> vals_;
  std::deque<Channel> store_;
  size_t mask_ = 0, count_ = 0;
  int shift_ = 0;
};

}  // namespace chorus::sim
