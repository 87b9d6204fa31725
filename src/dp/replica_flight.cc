// The all-reduces of the step protocol: launching each bucket when it is ready, waiting for
// it, and copying the averaged gradients out.
#include "dp/replica_impl.h"

#include <algorithm>
#include <exception>
#include <sstream>

namespace chorus::dp {

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

}  // namespace chorus::dp
