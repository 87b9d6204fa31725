#include "dp/step_timing.h"

#include "core/trace_subject.h"

namespace chorus::dp {

void StepTiming::stepBegan() {
  stepStartAt_ = trace::ticks();
  slowestWait_ = 0;
}

void StepTiming::computeEnded(const Communicator& comm, int64_t step) {
  const std::shared_ptr<trace::Subject> subject = traceSubjectOf(comm);
  if (!subject) return;
  trace::SpanRecord s;
  s.kind = trace::SpanKind::kCompute;
  s.step = step;
  s.startAt = stepStartAt_;
  s.endAt = trace::ticks();
  subject->spans.add(s);
}

void StepTiming::launched(const Communicator& comm, size_t bucket, int slot, uint64_t bytes) {
  const size_t i = bucket * 2 + static_cast<size_t>(slot);
  if (launches_.size() <= i) launches_.resize(i + 1);
  Launch& l = launches_[i];
  l.subject = traceSubjectOf(comm);
  if (!l.subject) return;
  // The call just issued on this thread is the one the recorder recorded last (a Replica is used
  // from one thread, and nothing else issues on its communicator meanwhile).
  l.id = l.subject->recorder.recorded();
  l.at = trace::ticks();
  l.bytes = bytes;
}

double StepTiming::seconds(uint64_t ticks) {
  if (!clock_) clock_ = trace::WallClock::now();
  return clock_->microsOf(static_cast<double>(ticks)) * 1e-6;
}

void StepTiming::finished(size_t bucket, int slot, int64_t step, StepMetrics& m) {
  const size_t i = bucket * 2 + static_cast<size_t>(slot);
  if (i >= launches_.size() || !launches_[i].subject) return;
  Launch& l = launches_[i];
  trace::CallTicks c;
  const bool known = l.subject->recorder.callTicks(l.id, &c) &&
                     c.kind == CollectiveKind::kAllReduce && c.state == trace::CallState::kDone &&
                     c.startedAt != 0 && c.endedAt >= c.lastArrivalAt;
  trace::SpanRecord s;
  s.kind = trace::SpanKind::kBucket;
  s.step = step;
  s.index = static_cast<int32_t>(bucket);
  s.bytes = l.bytes;
  // The launch is the call's issue (the tick taken after comm.allReduce returned may already be
  // past the end of a call the worker ran at once).
  s.startAt = known && c.issuedAt != 0 ? c.issuedAt : l.at;
  s.endAt = known ? c.endedAt : trace::ticks();
  if (s.endAt < s.startAt) s.endAt = s.startAt;
  if (known) {
    s.call = static_cast<int64_t>(c.number);
    s.waitTicks = c.lastArrivalAt - c.startedAt;
    s.transferTicks = c.endedAt - c.lastArrivalAt;
    s.lastPeer = c.lastPeer;
    const double wait = seconds(s.waitTicks);
    m.waitForSlowestSeconds += wait;
    m.transferSeconds += seconds(s.transferTicks);
    if (c.lastPeer >= 0 && wait > slowestWait_) {
      slowestWait_ = wait;
      m.slowestRank = c.lastPeer;
    }
  }
  l.subject->spans.add(s);
  l.subject.reset();
}

}  // namespace chorus::dp
