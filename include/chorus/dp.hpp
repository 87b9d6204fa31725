// Data-parallel training on top of a Communicator, independent of any framework: gradients are
// averaged in buckets that start while backward still runs. See docs/dp.md.
#pragma once

#include <chorus/communicator.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace chorus::dp {

enum class Mode {
  kSync,      // every optimizer step applies this step's gradients averaged over all ranks
  kDelayed,   // each step applies the previous step's average while this step's is in flight
  kLocalSgd,  // no gradient traffic; parameters are averaged every localSgdPeriod steps
};

struct Options {
  // Largest bucket (bytes of gradients). A bucket's all-reduce starts when its last gradient is
  // ready, so smaller buckets start earlier in backward; each costs one more call.
  size_t bucketBytes = size_t{25} << 20;
  // Buckets are also capped at (total gradient bytes / minBuckets), so that a small model is
  // still cut into several buckets and its communication overlaps backward (0: no such cap).
  int minBuckets = 4;
  // Micro-steps per optimizer step (K); gradients accumulate in the framework's buffers and only
  // the K-th micro-step communicates. The layer divides the accumulated sum by K.
  int accumulationSteps = 1;
  Mode mode = Mode::kSync;
  int localSgdPeriod = 8;  // H, LocalSgd only
  // Consistency check every N optimizer steps (0: never): a parameter hash in Sync and Delayed
  // (replicas must be bit-identical), the divergence in LocalSgd.
  int checkEvery = 100;
  // LocalSgd: a measured divergence above this is an Error on every rank.
  std::optional<double> divergenceLimit;
  // Receives one line per divergence measurement; unset: std::cerr on rank 0.
  std::function<void(const std::string&)> log;
};

// One optimizer step; times in seconds. See docs/dp.md for the exact definitions.
struct StepMetrics {
  int64_t step = 0;                  // optimizer steps completed, this one included
  double computeSeconds = 0;         // first beginStep to the synchronising waitGradients
  double commSeconds = 0;            // sum over buckets of launch to observed completion
  double exposedCommSeconds = 0;     // time blocked inside waitGradients
  uint64_t bytesReduced = 0;         // payload of the all-reduces launched this step
  int buckets = 0;                   // all-reduces launched this step
  int bucketsLaunchedEarly = 0;      // of those, launched from gradientReady (overlapping backward)
  std::optional<double> divergence;  // max |p_i - p_j| over ranks, LocalSgd check steps only

  // The bucket all-reduces completed this step, split as the flight recorder saw them on this
  // rank: from each call's start to the first message of the peer that came last (waiting for
  // the slowest rank), and from there to its end (moving bytes). 0 when the recorder is off.
  double waitForSlowestSeconds = 0;
  double transferSeconds = 0;
  // The peer behind this step's longest such wait: the straggler of this step; -1: none.
  int slowestRank = -1;
};

struct BucketInfo {
  std::vector<size_t> params;  // parameter indices, in the order they sit in the bucket
  size_t bytes = 0;
  bool fused = false;  // several tensors copied into one buffer
};

// One model replica. Not thread-safe: call it from one thread at a time. f32 tensors only.
// Every rank must register the same parameters in the same order.
class Replica {
 public:
  Replica(Communicator& comm, Options options = {});
  // Waits for all-reduces still in flight (Delayed mode). When unwinding from an exception it
  // aborts the communicator instead, so peers fail at once rather than at their deadline.
  ~Replica();
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // Registers a tensor in model (forward) order; returns its index for gradientReady. The
  // buffers must outlive the Replica.
  size_t addParameter(std::string name, float* param, float* grad, size_t count);
  // Builds the buckets (reverse registration order, up to bucketBytes each). Call once.
  void finalize();
  // Copies root's parameters to every rank; returns when all ranks have them.
  void broadcastParameters(int root = 0);

  // Starts a micro-step.
  void beginStep();
  // Gradient `index` is final for this micro-step. Buckets launch in bucket order as soon as all
  // their gradients are ready, so ranks may report gradients in different orders. Do not touch
  // a reported gradient until waitGradients returns.
  void gradientReady(size_t index);
  // Ends the micro-step. Returns false on accumulation micro-steps (do not step the optimizer,
  // do not zero the gradients). Returns true on the last micro-step: the grad buffers hold the
  // gradients to apply; run the optimizer, call afterOptimizerStep, then zero the gradients.
  // Gradients never reported ready are taken as final here.
  bool waitGradients();
  // Parameter averaging (LocalSgd), the periodic consistency check, and the step's metrics.
  void afterOptimizerStep();

  // FNV-1a over the raw bytes of all registered parameters, and the ranks whose hash differs
  // from rank 0's (a collective: every rank must call it).
  uint64_t parameterHash() const;
  std::vector<int> ranksDifferingFromRoot() const;

  int64_t step() const;  // optimizer steps completed
  const StepMetrics& lastMetrics() const;
  const std::vector<BucketInfo>& buckets() const;
  // Buckets launched so far in the current micro-step (to observe overlap).
  size_t launchedBuckets() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace chorus::dp
