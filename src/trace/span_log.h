// Spans that a layer above the communicator records beside its calls, for the dumps and the
// timeline: the data-parallel layer's backward pass and bucket all-reduces. A fixed ring written
// by one thread at a time (a dp Replica is used from one thread) and read by a dump without
// locks, like the call ring (recorder.h): nothing is allocated when a span is added.
#pragma once

#include "trace/clock.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace chorus::trace {

enum class SpanKind : uint8_t { kCompute, kBucket };
const char* toString(SpanKind k);

// A span as written and as read back; times in ticks (trace/clock.h).
struct SpanRecord {
  SpanKind kind = SpanKind::kCompute;
  int64_t step = 0;    // the optimizer step (1 = the first)
  int32_t index = -1;  // bucket index; -1 for compute
  int64_t call = -1;   // the number of the bucket's all-reduce ("allreduce #N"); -1: unknown
  uint64_t bytes = 0;  // bucket payload
  uint64_t startAt = 0, endAt = 0;
  uint64_t waitTicks = 0,
           transferTicks = 0;  // bucket: the split of its all-reduce (see StepTiming)
  int32_t lastPeer = -1;       // bucket: the peer whose first message came last, -1: none
};

// The ring is allocated by the first add(), so that communicators without such a layer pay
// nothing for it.
class SpanLog {
 public:
  explicit SpanLog(size_t capacity) : capacity_(capacity) {}
  ~SpanLog();
  SpanLog(const SpanLog&) = delete;
  SpanLog& operator=(const SpanLog&) = delete;
  size_t capacity() const { return capacity_; }
  void add(const SpanRecord& s);
  uint64_t added() const { return added_.load(std::memory_order_acquire); }
  // The spans still in the ring, oldest first.
  std::vector<SpanRecord> spans() const;

 private:
  static constexpr int kWords = 10;
  struct alignas(64) Slot {
    std::atomic<uint64_t> version{0};  // 2 x (1 + position) once written, odd while written
    std::atomic<uint64_t> words[kWords] = {};
  };
  const size_t capacity_;
  std::atomic<Slot*> ring_{nullptr};
  std::atomic<uint64_t> added_{0};
};

}  // namespace chorus::trace
