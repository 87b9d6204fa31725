// The scheduler's events by time: a rank to resume, or a request that completes.
#pragma once

#include "sim/sim_time.h"
#include "transport/transport.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace chorus::sim {

struct Event {
  Time time;
  transport::Request* req;  // null: resume the rank; else: the request completes
  int rank;
};

// Events by time. Times never go below the last one taken (a rank acts at its clock, which is
// never behind the earliest pending event), so a radix heap fits: pushes are O(1), and each event
// moves down a few of 64 buckets before it is taken, in sequential passes instead of a binary
// heap's cache misses. Events of equal time come out in the order they were pushed (bucket 0 is
// a FIFO), which keeps runs deterministic.
class EventQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  void push(const Event& e) {
    buckets_[bucketOf(e.time)].push_back(e);
    ++size_;
  }
  // The earliest time; the queue must not be empty.
  Time top() {
    settle();
    return last_;
  }
  Event pop() {
    settle();
    --size_;
    Event e = buckets_[0][head_++];
    if (head_ == buckets_[0].size()) {
      buckets_[0].clear();
      head_ = 0;
    }
    return e;
  }
  void clear() {
    for (auto& b : buckets_) b.clear();
    head_ = 0;
    size_ = 0;
    last_ = 0;
  }

 private:
  int bucketOf(Time t) const {
    return t == last_ ? 0 : 64 - __builtin_clzll(static_cast<uint64_t>(t ^ last_));
  }
  // Makes bucket 0 hold the earliest events.
  void settle() {
    if (head_ < buckets_[0].size()) return;
    int i = 1;
    while (buckets_[i].empty()) ++i;
    std::vector<Event>& b = buckets_[i];
    Time m = b[0].time;
    for (const Event& e : b) m = std::min(m, e.time);
    last_ = m;
    for (const Event& e : b) buckets_[bucketOf(e.time)].push_back(e);  // all land below i
    b.clear();
  }
  std::vector<Event> buckets_[65];
  size_t head_ = 0;  // bucket 0 is taken from the front
  size_t size_ = 0;
  Time last_ = 0;
};

}  // namespace chorus::sim
