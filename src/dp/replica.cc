// Replica's public calls: registration and the step protocol of docs/dp.md (the all-reduces are
// in replica_flight.cc, the bucket layout in replica_layout.cc).
#include "dp/replica_impl.h"
#include "dp/wire_call.h"

#include <algorithm>
#include <exception>

namespace chorus::dp {
MembershipChanged::MembershipChanged(MembershipChange c)
    : std::runtime_error("dp: membership changed from " + std::to_string(c.oldSize) + " to " +
                         std::to_string(c.newSize) + " ranks (generation " +
                         std::to_string(c.generation) + "); redo step " +
                         std::to_string(c.step + 1)),
      change(std::move(c)) {}

Replica::Replica(Communicator& comm, Options options)
    : impl_(std::make_unique<Impl>(comm, std::move(options))) {
  validateOptions(impl_->opt, false);
}

Replica::Replica(std::unique_ptr<Communicator> comm, Options options) {
  if (!comm) throw invalid("null communicator");
  impl_ = std::make_unique<Impl>(std::move(comm), std::move(options));
  validateOptions(impl_->opt, true);
}

Replica::~Replica() {
  bool active = false;
  for (Bucket& k : impl_->buckets) {
    for (Flight& f : k.flight) active = active || f.active;
  }
  if (!active) return;
  // The all-reduces write into our buffers: they must end before the buffers go away.
  if (std::uncaught_exceptions() > 0) impl_->comm->abort();
  for (Bucket& k : impl_->buckets) {
    for (Flight& f : k.flight) {
      if (!f.active) continue;
      try {
        f.wait();
      } catch (...) {  // the failure, if any, was or will be reported by the communicator
      }
    }
  }
}

size_t Replica::addParameter(std::string name, float* param, float* grad, size_t count) {
  return addParameter(std::move(name), param, grad, std::vector<size_t>{count});
}

size_t Replica::addParameter(std::string name, float* param, float* grad,
                             std::vector<size_t> shape) {
  if (impl_->finalized) throw invalid("addParameter after finalize");
  if (shape.empty()) shape.push_back(1);  // a scalar
  size_t count = 1;
  for (size_t d : shape) count *= d;
  if (param == nullptr && count > 0) throw invalid("null buffer for " + name);
  impl_->params.push_back({std::move(name), param, grad, count, std::move(shape)});
  impl_->params.back().heldByReplica = grad == nullptr && count > 0;
  return impl_->params.size() - 1;
}

void Replica::broadcastParameters(int root) {
  Impl& m = *impl_;
  m.anchorStale = true;
  std::vector<Work> works;
  for (const Param& p : m.params) {
    works.push_back(withContext("dp broadcastParameters (param " + p.name + ")", [&] {
      return m.comm->broadcast(p.value, p.count, DataType::kF32, root);
    }));
  }
  for (size_t i = 0; i < works.size(); ++i) {
    withContext("dp broadcastParameters (param " + m.params[i].name + ")",
                [&] { works[i].wait(); });
  }
}

void Replica::beginStep() {
  Impl& m = *impl_;
  if (!m.finalized) throw invalid("beginStep before finalize");
  if (m.inMicroStep) throw invalid("beginStep twice without waitGradients");
  if (m.lastMicroStep()) throw invalid("beginStep before afterOptimizerStep");
  if (m.micro++ == 0) {
    m.stepStart = Clock::now();
    m.current = StepMetrics{};
    m.timing.stepBegan();
    m.sentAtStepStart = bytesSentBy(*m.comm);
    // The parameters every rank starts from (after synchronize) are the first anchor.
    if (m.diloco && m.anchorStale) m.diloco->resetAnchor();
    m.anchorStale = false;
  }
  for (Param& p : m.params) p.ready = false;
  for (size_t b = 0; b < m.buckets.size(); ++b) m.buckets[b].pending = m.infos[b].params.size();
  m.nextLaunch = 0;
  m.inMicroStep = true;
}

void Replica::gradientReady(size_t index) {
  Impl& m = *impl_;
  if (!m.inMicroStep) throw invalid("gradientReady outside beginStep/waitGradients");
  if (index >= m.params.size())
    throw invalid("gradientReady: no parameter " + std::to_string(index));
  Param& p = m.params[index];
  if (p.ready) throw invalid("gradientReady(" + p.name + ") twice in one micro-step");
  p.ready = true;
  // Accumulation micro-steps, LocalSgd and DiLoCo never send gradients.
  if (!m.lastMicroStep() || m.sendsNoGradients()) return;
  m.buckets[p.bucket].pending -= 1;
  m.launchReady(true);
  m.poll();
}

bool Replica::waitGradients() {
  Impl& m = *impl_;
  if (!m.inMicroStep) throw invalid("waitGradients without beginStep");
  m.inMicroStep = false;
  if (!m.lastMicroStep()) return false;
  m.current.computeSeconds = secondsBetween(m.stepStart, Clock::now());
  m.timing.computeEnded(*m.comm, m.steps + 1);
  const float scale = 1.0f / static_cast<float>(m.opt.accumulationSteps);
  if (m.sendsNoGradients()) {
    m.scaleLocal(scale);
    return true;
  }
  for (Param& p : m.params) {
    if (!p.ready) {
      p.ready = true;
      m.buckets[p.bucket].pending -= 1;
    }
  }
  m.launchReady(false);
  m.poll();
  if (m.opt.mode == Mode::kSync) {
    if (m.deferredFailure) m.changeMembership(m.deferredFailure->what());
    // Elastic: a failure in any bucket discards the whole step (the buckets that completed are
    // overwritten by zeros), so no partial average is ever applied.
    m.guarded([&] {
      for (size_t b = 0; b < m.buckets.size(); ++b) m.secondPhase(b);
      for (size_t b = 0; b < m.buckets.size(); ++b) {
        m.finish(b, 0, m.steps + 1);
        m.copyOut(b, 0, scale);
      }
    });
    return true;
  }
  // Delayed: apply the previous step's average; this step's stays in flight.
  const int prev = 1 - m.slot();
  if (m.steps == 0) {
    for (Param& p : m.params) std::fill(p.grad, p.grad + p.count, 0.0f);
    return true;
  }
  for (size_t b = 0; b < m.buckets.size(); ++b) {
    m.finish(b, prev, m.steps);
    m.copyOut(b, prev, scale);
  }
  return true;
}

void Replica::afterOptimizerStep() {
  Impl& m = *impl_;
  if (m.inMicroStep || !m.lastMicroStep()) {
    throw invalid("afterOptimizerStep must follow a waitGradients that returned true");
  }
  m.steps += 1;
  m.progress += 1;
  m.micro = 0;
  m.current.step = m.steps;
  m.last = m.current;
  if (m.opt.mode == Mode::kLocalSgd && m.steps % m.opt.localSgdPeriod == 0) m.averageParameters();
  if (m.diloco) m.dilocoStep();  // measures the divergence itself, before syncing
  if (m.opt.checkEvery > 0 && m.steps % m.opt.checkEvery == 0 && !m.diloco) {
    m.guarded([&] { m.check(); });
  }
  m.current.bytesSent = bytesSentBy(*m.comm) - m.sentAtStepStart;
  m.last = m.current;
  m.maybeAdmitJoiners();
}

uint64_t Replica::parameterHash() const { return hashParameters(impl_->values()); }
std::vector<int> Replica::ranksDifferingFromRoot() {
  Impl& m = *impl_;
  auto differ =
      m.guarded([&] { return dp::ranksDifferingFromRoot(*m.comm, hashParameters(m.values())); });
  m.progress += 1;
  return differ;
}

Communicator& Replica::communicator() const { return *impl_->comm; }

void Replica::collective(const std::function<void(Communicator&)>& fn) {
  Impl& m = *impl_;
  if (m.inMicroStep) throw invalid("collective during a micro-step");
  m.guarded([&] { fn(*m.comm); });
  m.progress += 1;
}

void Replica::addState(std::string name, float* data, size_t count) {
  if (impl_->inMicroStep) throw invalid("addState during a micro-step");
  if (data == nullptr && count > 0) throw invalid("null buffer for state " + name);
  impl_->extra.push_back({std::move(name), data, count, DataType::kF32});
}

void Replica::addState(std::string name, int64_t* data, size_t count) {
  if (impl_->inMicroStep) throw invalid("addState during a micro-step");
  if (data == nullptr && count > 0) throw invalid("null buffer for state " + name);
  impl_->extra.push_back({std::move(name), data, count, DataType::kI64});
}

void Replica::synchronize() {
  Impl& m = *impl_;
  if (!m.finalized) throw invalid("synchronize before finalize");
  if (m.inMicroStep || m.micro != 0) throw invalid("synchronize during a step");
  // DiLoCo: a copy leaves every rank with the same parameters, the new anchor; without one the
  // ranks keep their anchor (their parameters may have drifted since the last sync).
  if (m.guarded([&] { return m.synchronizeState(); }) >= 0) m.anchorStale = true;
}

void Replica::restoreStep(int64_t step) {
  Impl& m = *impl_;
  if (step < 0) throw invalid("restoreStep: negative step");
  if (m.inMicroStep || m.micro != 0) throw invalid("restoreStep during a step");
  m.steps = step;
  // Ahead of every rank that did not restore, so that synchronize copies from this one.
  m.progress = std::max(m.progress, step);
}

int64_t Replica::step() const { return impl_->steps; }
const StepMetrics& Replica::lastMetrics() const { return impl_->last; }
const std::vector<BucketInfo>& Replica::buckets() const { return impl_->infos; }
size_t Replica::launchedBuckets() const { return impl_->nextLaunch; }

float* Replica::gradient(size_t index) const {
  const Impl& m = *impl_;
  if (!m.finalized) throw invalid("gradient before finalize");
  if (index >= m.params.size()) throw invalid("gradient: no parameter " + std::to_string(index));
  return m.params[index].grad;
}

}  // namespace chorus::dp
