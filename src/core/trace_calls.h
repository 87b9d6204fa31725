// What the communicator records of each call in the flight recorder, inline: every call passes
// through these, and a call into another object file costs about as much as the recording
// (docs/trace-format.md, "Cost per call"). The rest of the communicator's tracing: tracing.cc.
#pragma once

#include "core/communicator_impl.h"
#include "trace/clock.h"
#include "trace/recorder.h"

namespace chorus {

inline void Communicator::Impl::traceIssue(Task& task, bool blocking) {
  if (!recorder_) return;
  const OpDesc& d = task.args.desc;
  const uint64_t bytes =
      d.kind == CollectiveKind::kSendRecv ? task.args.bytes : d.count * sizeOf(d.dtype);
  // A small blocking call that will run at once is stamped at its first wait (recorder.h).
  const bool stampLater = blocking && queue_.empty() && !busy_ &&
                          d.kind != CollectiveKind::kSendRecv &&
                          bytes < trace::kStampAtFirstWaitBelowBytes;
  task.issuedAt = stampLater ? 0 : trace::ticks();
  task.traceId = recorder_->issue(d, bytes, task.issuedAt);
}

inline void Communicator::Impl::traceStart(Task& task) {
  if (!recorder_) return;
  // issuedAt 0: stamped at the first wait (traceIssue).
  task.startedAt = task.startsAtIssue ? task.issuedAt : trace::ticks();
  recorder_->start(task.traceId, task.args.desc.algo, task.startedAt);
}

inline void Communicator::Impl::traceEnd(const Task& task, bool ok) {
  // issuedAt 0: a small call stamped at its first wait, which ends at its last stamp (recorder.h).
  if (recorder_) {
    recorder_->end(task.traceId, ok, task.issuedAt == 0 ? trace::kEndAtLastStamp : trace::ticks());
  }
}

}  // namespace chorus
