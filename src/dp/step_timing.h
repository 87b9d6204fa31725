// Where a step's communication time goes, from the flight recorder: per bucket all-reduce, the
// wait for the slowest rank (from this rank's start of the call to the first message of the peer
// that came last) and the transfer (the rest of the call), summed per step into StepMetrics; and
// the step's spans (backward, each bucket from launch to completion) for the dumps and the
// timeline (docs/trace-format.md). Does nothing when the recorder is off.
#pragma once

#include <chorus/communicator.hpp>
#include <chorus/dp.hpp>

#include "trace/clock.h"
#include "trace/subject.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace chorus::dp {

class StepTiming {
 public:
  // The first beginStep of an optimizer step.
  void stepBegan();
  // The synchronising waitGradients of optimizer step `step` (1 = the first) begins.
  void computeEnded(const Communicator& comm, int64_t step);
  // comm.allReduce just returned the Work of bucket `bucket` in buffer slot `slot`.
  void launched(const Communicator& comm, size_t bucket, int slot, uint64_t bytes);
  // That all-reduce has completed (its Work was waited for): adds its split to `m` and records
  // its span under optimizer step `step`.
  void finished(size_t bucket, int slot, int64_t step, StepMetrics& m);

 private:
  struct Launch {
    std::shared_ptr<trace::Subject> subject;  // null: recorder off
    uint64_t id = 0;                          // the call's entry
    uint64_t at = 0;                          // ticks
    uint64_t bytes = 0;
  };
  double seconds(uint64_t ticks);

  uint64_t stepStartAt_ = 0;
  std::vector<Launch> launches_;  // by bucket * 2 + slot
  std::optional<trace::WallClock> clock_;
  double slowestWait_ = 0;  // the largest bucket wait of the current step
};

}  // namespace chorus::dp
