// Replica: bucketed, overlapped gradient averaging and the step protocol of docs/dp.md.
#include "dp/bucket_plan.h"
#include "dp/replica_impl.h"
#include "dp/wire_call.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <sstream>

namespace chorus::dp {
namespace {

double secondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

std::string Replica::Impl::bucketContext(size_t b, int64_t step) const {
  std::ostringstream s;
  s << "dp step " << step << ", bucket " << b << " (params ";
  const auto& ps = infos[b].params;
  for (size_t i = 0; i < ps.size(); ++i) s << (i ? ", " : "") << params[ps[i]].name;
  s << ")";
  return s.str();
}

bool Flight::isCompleted() const {
  for (const Work& w : works) {
    if (!w.isCompleted()) return false;
  }
  return true;
}

void Flight::wait() const {
  std::exception_ptr first;
  for (const Work& w : works) {
    try {
      w.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

float* Replica::Impl::gradientsOf(size_t b, int s) {
  Bucket& k = buckets[b];
  return k.flat ? k.buffer[s].data() : params[infos[b].params[0]].grad;
}

void Replica::Impl::launch(size_t b, bool early) {
  // After a failure the communicator is aborted: launching more would only fail again.
  if (deferredFailure) return;
  Bucket& k = buckets[b];
  const int s = slot();
  float* target = gradientsOf(b, s);
  if (k.flat) {
    for (size_t i : infos[b].params) {
      const Param& p = params[i];
      float* slot = k.buffer[s].data() + p.offset;
      if (p.grad != slot) std::copy(p.grad, p.grad + p.count, slot);  // held there: no copy
    }
  }
  Flight& f = k.flight[s];
  f.works.clear();
  uint64_t payload = k.elements * sizeof(float);
  try {
    withContext(bucketContext(b, steps + 1), [&] {
      if (k.codec) {
        payload = k.codec->launch(*comm, target, f.works);
      } else {
        f.works.push_back(
            comm->allReduce(target, target, k.elements, DataType::kF32, ReduceOp::kAvg));
      }
    });
  } catch (const Error& e) {
    // Those issued write into our buffers: they are waited for with the others.
    f.active = !f.works.empty();
    f.observed = false;
    // Launches run inside backward (autograd hooks), where an exception would lose its type:
    // waitGradients raises it.
    if (!recoverable(e)) throw;
    deferredFailure = e;
    return;
  }
  timing.launched(*comm, b, s, payload);
  f.launchedAt = Clock::now();
  f.active = true;
  f.observed = false;
  current.buckets += static_cast<int>(f.works.size());
  current.bytesReduced += payload;
  if (early) current.bucketsLaunchedEarly += static_cast<int>(f.works.size());
}

// PowerSGD's second all-reduce of bucket b (Sync): needs the first one's result, so it is issued
// from waitGradients, after every bucket's first one (the same order on every rank).
void Replica::Impl::secondPhase(size_t b) {
  Bucket& k = buckets[b];
  Flight& f = k.flight[0];
  if (!k.codec || !k.codec->twoPhases() || !f.active) return;
  const auto t0 = Clock::now();
  withContext(bucketContext(b, steps + 1), [&] { f.wait(); });
  if (!f.observed) current.exposedCommSeconds += secondsBetween(t0, Clock::now());
  const size_t before = f.works.size();
  const uint64_t payload = withContext(bucketContext(b, steps + 1) + ", second phase",
                                       [&] { return k.codec->launchSecond(*comm, f.works); });
  f.observed = false;  // complete once the second phase is
  current.buckets += static_cast<int>(f.works.size() - before);
  current.bytesReduced += payload;
}

void Replica::Impl::resetCompression() {
  for (Bucket& k : buckets) {
    if (k.codec) k.codec->reset();
  }
}

// Buckets go out in bucket order on every rank (collectives must be issued in the same order),
// each as soon as it and all before it are ready.
void Replica::Impl::launchReady(bool early) {
  while (nextLaunch < buckets.size() && buckets[nextLaunch].pending == 0)
    launch(nextLaunch++, early);
}

void Replica::Impl::observe(Flight& f, Clock::time_point now) {
  if (f.active && !f.observed) {
    f.observed = true;
    current.commSeconds += secondsBetween(f.launchedAt, now);
  }
}

// Counts completions as early as we can see them (there are no completion time stamps).
void Replica::Impl::poll() {
  const auto now = Clock::now();
  for (Bucket& k : buckets) {
    for (Flight& f : k.flight) {
      if (f.active && !f.observed && f.isCompleted()) observe(f, now);
    }
  }
}

void Replica::Impl::finish(size_t b, int s, int64_t launchStep) {
  Flight& f = buckets[b].flight[s];
  if (!f.active) return;
  const auto t0 = Clock::now();
  try {
    withContext(bucketContext(b, launchStep), [&] { f.wait(); });
  } catch (...) {
    f.active = false;
    throw;
  }
  const auto t1 = Clock::now();
  // Seen complete already: nothing was exposed (the wait only collects the outcome).
  if (!f.observed) current.exposedCommSeconds += secondsBetween(t0, t1);
  observe(f, t1);
  timing.finished(b, s, launchStep, current);
  f.active = false;
}

void Replica::Impl::copyOut(size_t b, int s, float scale) {
  Bucket& k = buckets[b];
  if (k.codec) k.codec->finish(gradientsOf(b, s));
  for (size_t i : infos[b].params) {
    Param& p = params[i];
    const float* src = k.flat ? k.buffer[s].data() + p.offset : p.grad;
    if (src != p.grad) {
      for (size_t j = 0; j < p.count; ++j) p.grad[j] = src[j] * scale;
    } else if (scale != 1.0f) {
      for (size_t j = 0; j < p.count; ++j) p.grad[j] *= scale;
    }
  }
}

void Replica::Impl::scaleLocal(float scale) {
  if (scale == 1.0f) return;
  for (Param& p : params) {
    for (size_t j = 0; j < p.count; ++j) p.grad[j] *= scale;
  }
}

void Replica::Impl::averageParameters() {
  std::vector<Work> works(buckets.size());
  for (size_t b = 0; b < buckets.size(); ++b) {
    Bucket& k = buckets[b];
    float* target = k.flat ? k.buffer[0].data() : params[infos[b].params[0]].value;
    if (k.flat) {
      for (size_t i : infos[b].params) {
        const Param& p = params[i];
        std::copy(p.value, p.value + p.count, k.buffer[0].data() + p.offset);
      }
    }
    works[b] = withContext(bucketContext(b, steps) + ", parameter averaging", [&] {
      return comm->allReduce(target, target, k.elements, DataType::kF32, ReduceOp::kAvg);
    });
    current.bytesReduced += k.elements * sizeof(float);
  }
  for (size_t b = 0; b < buckets.size(); ++b) {
    withContext(bucketContext(b, steps) + ", parameter averaging", [&] { works[b].wait(); });
    if (!buckets[b].flat) continue;
    for (size_t i : infos[b].params) {
      Param& p = params[i];
      const float* src = buckets[b].buffer[0].data() + p.offset;
      std::copy(src, src + p.count, p.value);
    }
  }
}

std::vector<Tensor> Replica::Impl::values() const {
  std::vector<Tensor> t;
  for (const Param& p : params) t.push_back({p.value, p.count});
  return t;
}

void Replica::Impl::check() {
  const std::string context = "dp step " + std::to_string(steps) + ", consistency check";
  if (opt.mode == Mode::kLocalSgd) {
    // Right after an averaging the replicas should hold the same bits: a hash shows whether
    // they do without sending the model.
    if (steps % opt.localSgdPeriod == 0 && withContext(context, [&] {
          return dp::ranksDifferingFromRoot(*comm, hashParameters(values())).empty();
        })) {
      reportDivergence(0, context);
      return;
    }
    const double d = withContext(context, [&] { return measureDivergence(*comm, values()); });
    reportDivergence(d, context);
    return;
  }
  const auto differ = withContext(
      context, [&] { return dp::ranksDifferingFromRoot(*comm, hashParameters(values())); });
  if (differ.empty()) return;
  std::ostringstream m;
  m << context << ": parameters on rank(s) ";
  for (size_t i = 0; i < differ.size(); ++i) m << (i ? ", " : "") << differ[i];
  m << " differ from rank 0's (replicas must be bit-identical in this mode)";
  throw Error(ErrorCode::kMismatch, m.str());
}

namespace {

void validateCompression(const Options& o) {
  const CompressionOptions& c = o.compression;
  if (c.kind == Compression::kNone) return;
  const std::string name = toString(c);
  if (o.mode == Mode::kLocalSgd || o.mode == Mode::kDiLoCo) {
    throw invalid("compression " + name +
                  " applies to gradients: Mode::kSync or kDelayed only (LocalSgd and DiLoCo send "
                  "no gradients)");
  }
  if (c.kind == Compression::kPowerSgd) {
    if (c.powerSgdRank < 1) throw invalid("compression.powerSgdRank must be >= 1");
    if (o.mode != Mode::kSync) throw invalid("compression " + name + " needs Mode::kSync");
  }
}

void validateDiLoCo(const DiLoCoOptions& d) {
  if (d.syncEvery < 1) throw invalid("diloco.syncEvery must be >= 1");
  if (d.fragments < 1) throw invalid("diloco.fragments must be >= 1");
  if (!(d.outerLr > 0) || !std::isfinite(d.outerLr)) throw invalid("diloco.outerLr must be > 0");
  if (!(d.outerMomentum >= 0 && d.outerMomentum < 1))
    throw invalid("diloco.outerMomentum must be in [0, 1)");
}

void validate(const Options& o, bool owned) {
  if (o.accumulationSteps < 1) throw invalid("accumulationSteps must be >= 1");
  validateCompression(o);
  if (o.mode == Mode::kDiLoCo) validateDiLoCo(o.diloco);
  if (o.localSgdPeriod < 1) throw invalid("localSgdPeriod must be >= 1");
  if (o.minBuckets < 0) throw invalid("minBuckets must be >= 0");
  if (o.checkEvery < 0) throw invalid("checkEvery must be >= 0");
  if (!o.elastic.enabled) return;
  if (!owned) throw invalid("elastic mode needs a Replica that owns its communicator");
  // Delayed keeps a step in flight across steps; LocalSgd and DiLoCo have no identical replicas
  // to copy from between syncs.
  if (o.mode != Mode::kSync) throw invalid("elastic mode supports Mode::kSync only");
  if (o.elastic.admitJoinersEvery < 0) throw invalid("elastic.admitJoinersEvery must be >= 0");
  if (o.elastic.minRanks < 1) throw invalid("elastic.minRanks must be >= 1");
}

}  // namespace

MembershipChanged::MembershipChanged(MembershipChange c)
    : std::runtime_error("dp: membership changed from " + std::to_string(c.oldSize) + " to " +
                         std::to_string(c.newSize) + " ranks (generation " +
                         std::to_string(c.generation) + "); redo step " +
                         std::to_string(c.step + 1)),
      change(std::move(c)) {}

Replica::Replica(Communicator& comm, Options options)
    : impl_(std::make_unique<Impl>(comm, std::move(options))) {
  validate(impl_->opt, false);
}

Replica::Replica(std::unique_ptr<Communicator> comm, Options options) {
  if (!comm) throw invalid("null communicator");
  impl_ = std::make_unique<Impl>(std::move(comm), std::move(options));
  validate(impl_->opt, true);
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

void Replica::finalize() {
  Impl& m = *impl_;
  if (m.finalized) throw invalid("finalize called twice");
  std::vector<size_t> bytes;
  for (const Param& p : m.params) bytes.push_back(p.count * sizeof(float));
  size_t total = 0;
  for (size_t b : bytes) total += b;
  size_t cap = m.opt.bucketBytes;
  if (m.opt.minBuckets > 0) {
    cap = std::min(cap, std::max<size_t>(1, total / static_cast<size_t>(m.opt.minBuckets)));
  }
  const CompressionOptions& c = m.opt.compression;
  auto canCompress = [&](size_t i) {
    return compressible(c, m.params[i].shape, m.params[i].count);
  };
  // Registered buckets on one host are all-reduced in place (read from the peers' buffers).
  // Not compressed buckets: a wire format is applied by the ring, which the in-place path
  // bypasses. Not in elastic mode: a membership change replaces the communicator the buffers
  // were allocated through, and gradients held in a bucket must keep their address.
  const bool registered =
      c.kind == Compression::kNone && !m.elastic() && sharesHostWithAll(*m.comm);
  // Gradients held by the Replica outside the buckets (the modes other than Sync).
  for (Param& p : m.params) {
    if (!p.heldByReplica || m.opt.mode == Mode::kSync) continue;
    p.gradStore.assign(p.count, 0.0f);
    p.grad = p.gradStore.data();
  }
  for (auto& members : planBuckets(bytes, cap)) {
    Bucket k;
    BucketInfo info;
    // The compressed tensors first: a rounding codec sends them as one run in the wire format.
    if (c.kind != Compression::kNone)
      std::stable_partition(members.begin(), members.end(), canCompress);
    std::vector<CodecTensor> tensors;
    for (size_t i : members) {
      m.params[i].bucket = m.buckets.size();
      m.params[i].offset = k.elements;
      tensors.push_back({k.elements, m.params[i].count, m.params[i].shape});
      k.elements += m.params[i].count;
    }
    info.params = std::move(members);
    info.bytes = k.elements * sizeof(float);
    info.fused = info.params.size() > 1;
    // Sync reduces where backward accumulated the gradients it holds; Delayed reduces copies
    // (the next step's backward writes the gradients while this step's average flies).
    const bool holds = m.opt.mode == Mode::kSync &&
                       std::any_of(info.params.begin(), info.params.end(),
                                   [&](size_t i) { return m.params[i].heldByReplica; });
    k.flat = info.fused || m.opt.mode == Mode::kDelayed || holds;
    if (k.flat) {
      const int copies = m.opt.mode == Mode::kDelayed ? 2 : 1;
      for (int s = 0; s < copies; ++s) k.buffer[s].allocate(*m.comm, k.elements, registered);
      for (size_t i : info.params) {
        Param& p = m.params[i];
        if (holds && p.heldByReplica) p.grad = k.buffer[0].data() + p.offset;
      }
    }
    // Sync and Delayed send gradients (validate() rejects compression in the other modes).
    k.codec = BucketCodec::make(c, std::move(tensors), m.buckets.size() + 1);
    m.buckets.push_back(std::move(k));
    m.infos.push_back(std::move(info));
  }
  if (m.opt.mode == Mode::kDiLoCo) m.diloco = std::make_unique<DiLoCo>(m.opt.diloco, m.values());
  m.finalized = true;
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
