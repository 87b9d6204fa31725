// Replica's state, shared by the step protocol (replica.cc, replica_flight.cc), the bucket
// layout (replica_layout.cc), the local modes (replica_local_sgd.cc, replica_diloco.cc), the
// consistency check (replica_check.cc), state synchronisation (state_sync.cc) and membership
// changes (elastic.cc).
#pragma once

#include <chorus/dp.hpp>

#include "dp/bucket_buffer.h"
#include "dp/bucket_codec.h"
#include "dp/consistency.h"
#include "dp/diloco.h"
#include "dp/step_timing.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace chorus::dp {

using Clock = std::chrono::steady_clock;

// Runs f; a chorus::Error from it is rethrown with `context` in front, keeping its code.
template <class F>
auto withContext(const std::string& context, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(e.code(), context + ": " + e.what());
  }
}

inline double secondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

inline Error invalid(const std::string& what) {
  return Error(ErrorCode::kInvalidArgument, "dp: " + what);
}

// replica_options.cc: throws Error(kInvalidArgument) for options a Replica cannot run with.
// owned: the Replica owns its communicator (elastic mode needs it).
void validateOptions(const Options& o, bool owned);

struct Param {
  std::string name;
  float* value;
  float* grad;  // set by finalize when the Replica holds the gradient (addParameter with null)
  size_t count;
  std::vector<size_t> shape;  // {count} when registered without one
  size_t bucket = 0;
  size_t offset = 0;  // elements into the bucket
  bool ready = false;
  bool heldByReplica = false;      // the gradient lives in the Replica: its bucket's buffer in Sync
  std::vector<float> gradStore{};  // ... or here in the other modes
};

// A buffer registered with addState.
struct ExtraState {
  std::string name;
  void* data;
  size_t count;
  DataType type;  // kF32 or kI64
};

// The all-reduces of a bucket (one, or two with compression: wire-format and plain tensors, or
// PowerSGD's P and Q). Delayed mode keeps two flights per bucket: the previous step's, still to
// be applied, and the current one.
struct Flight {
  std::vector<Work> works;
  Clock::time_point launchedAt;
  bool active = false;
  bool observed = false;  // completion already counted in commSeconds

  bool isCompleted() const;
  // Waits for every Work (also after one failed: they write into our buffers), then throws the
  // first failure.
  void wait() const;
};

struct Bucket {
  size_t elements = 0;
  // Reduce the flat buffer (fused, Delayed, or gradients held by the Replica); otherwise the
  // gradient in place.
  bool flat = false;
  BucketBuffer buffer[2];
  Flight flight[2];
  size_t pending = 0;                  // gradients not yet ready in this micro-step
  std::unique_ptr<BucketCodec> codec;  // null: sent as f32
};

struct Replica::Impl {
  std::unique_ptr<Communicator> owned;  // set when the Replica owns its communicator
  Communicator* comm;
  Options opt;
  std::vector<Param> params;
  std::vector<ExtraState> extra;
  std::vector<Bucket> buckets;
  std::vector<BucketInfo> infos;
  bool finalized = false;
  bool synchronized = false;  // synchronize() has run once
  bool inMicroStep = false;
  int micro = 0;      // micro-steps begun in the current optimizer step
  int64_t steps = 0;  // optimizer steps completed
  // Steps and collectives completed: replicas with the same progress hold the same state, and
  // after a membership change the most advanced one is the source of the state.
  int64_t progress = 0;
  size_t nextLaunch = 0;
  // Elastic mode: a failure seen while launching (inside backward), raised at waitGradients.
  std::optional<Error> deferredFailure;
  Clock::time_point stepStart;
  StepMetrics current, last;
  StepTiming timing;               // wait vs transfer, spans for the timeline
  uint64_t sentAtStepStart = 0;    // Communicator::bytesSent at the step's first beginStep
  std::unique_ptr<DiLoCo> diloco;  // DiLoCo mode
  bool anchorStale = true;         // DiLoCo: take the parameters as anchor at the next step

  Impl(Communicator& c, Options o) : comm(&c), opt(std::move(o)) {}
  Impl(std::unique_ptr<Communicator> c, Options o)
      : owned(std::move(c)), comm(owned.get()), opt(std::move(o)) {}

  bool elastic() const { return opt.elastic.enabled; }
  bool lastMicroStep() const { return micro == opt.accumulationSteps; }
  bool sendsNoGradients() const { return opt.mode == Mode::kLocalSgd || opt.mode == Mode::kDiLoCo; }
  // Delayed alternates buffers so that one step's all-reduce can fly during the next step.
  int slot() const { return opt.mode == Mode::kDelayed ? static_cast<int>(steps % 2) : 0; }

  std::string bucketContext(size_t b, int64_t step) const;
  float* gradientsOf(size_t b, int s);  // the buffer a bucket is reduced in
  void launch(size_t b, bool early);
  void secondPhase(size_t b);
  void launchReady(bool early);
  void observe(Flight& f, Clock::time_point now);
  void poll();
  void finish(size_t b, int s, int64_t launchStep);
  void copyOut(size_t b, int s, float scale);
  void scaleLocal(float scale);
  void averageParameters();
  void dilocoStep();
  void reportDivergence(double d, const std::string& context);
  void resetCompression();
  std::vector<Tensor> values() const;
  void check();

  // state_sync.cc: the agreement and the copy of synchronize(); returns the source rank, or -1
  // when every rank already held the same state.
  int synchronizeState();

  // elastic.cc
  // A failure that a membership change can repair (elastic mode only).
  bool recoverable(const Error& e) const;
  // Lets the step's all-reduces end and drops the step: zero gradients, no micro-step begun.
  void discardStep();
  // Waits out the step's all-reduces, discards the step, changes the membership, synchronises
  // and throws MembershipChanged. `cause` empty: admitting newcomers, nothing failed.
  [[noreturn]] void changeMembership(const std::string& cause);
  // Every admitJoinersEvery steps: admits waiting newcomers (may throw MembershipChanged).
  void maybeAdmitJoiners();
  // Runs f; in elastic mode a recoverable Error from it becomes a membership change.
  template <class F>
  auto guarded(F&& f) {
    try {
      return f();
    } catch (const Error& e) {
      if (!recoverable(e)) throw;
      changeMembership(e.what());
    }
  }
};

}  // namespace chorus::dp
