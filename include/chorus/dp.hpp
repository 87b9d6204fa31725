// Data-parallel training on top of a Communicator, independent of any framework: gradients are
// averaged in buckets that start while backward still runs. See docs/dp.md.
#pragma once

#include <chorus/export.h>

#include <chorus/communicator.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::dp {

enum class Mode {
  kSync,      // every optimizer step applies this step's gradients averaged over all ranks
  kDelayed,   // each step applies the previous step's average while this step's is in flight
  kLocalSgd,  // no gradient traffic; parameters are averaged every localSgdPeriod steps
  // No gradient traffic; every diloco.syncEvery steps the ranks average the change since the
  // last sync and apply it with an outer optimizer (SGD with Nesterov momentum).
  kDiLoCo,
};

// How gradient buckets travel in Sync and Delayed modes (docs/dp.md, "Gradient compression").
enum class Compression {
  kNone,      // f32
  kBf16,      // bfloat16 on the wire, reduced in f32
  kFp16,      // float16 on the wire, reduced in f32
  kInt8,      // int8 with a scale per block of values
  kPowerSgd,  // rank-R factors P and Q of each matrix-shaped gradient
};

struct CompressionOptions {
  Compression kind = Compression::kNone;
  int powerSgdRank = 1;  // R, PowerSGD only
  // Add each step's compression error (per rank) to the next step's gradient.
  bool errorFeedback = true;
  // Smaller tensors (and, for PowerSGD, tensors that are not matrices) go uncompressed.
  size_t minElements = 4096;
};

// "none", "bf16", "fp16", "int8" or "powersgd:R" (R >= 1); throws Error(kInvalidArgument) for
// anything else.
CHORUS_API CompressionOptions parseCompression(std::string_view text);
// The same form ("powersgd:2").
CHORUS_API std::string toString(const CompressionOptions& c);

// Mode::kDiLoCo (docs/dp.md, "DiLoCo").
struct DiLoCoOptions {
  int syncEvery = 32;  // H: inner (local optimizer) steps between outer steps
  double outerLr = 0.7;
  double outerMomentum = 0.9;
  bool nesterov = true;  // Nesterov momentum for the outer SGD
  // F: the parameters are cut into F contiguous groups of about equal size; group f syncs at
  // the steps where step % H == f * H / F, so no step sends the whole model (1: all at once).
  int fragments = 1;
};

// What a membership change did (elastic mode; docs/dp.md, "Elastic training").
struct MembershipChange {
  int oldSize = 0;
  int newSize = 0;
  uint64_t generation = 0;       // of the new communicator
  std::vector<int> formerRanks;  // per new rank: its rank before the change, -1 for a newcomer
  std::vector<int> lostRanks;    // ranks before the change that are gone, ascending
  int joined = 0;                // newcomers admitted
  // New rank whose parameters, registered state and step every rank now has; -1 when no copy
  // was needed (every rank already held the same state).
  int stateSource = -1;
  int64_t step = 0;   // optimizer steps completed, after the change
  std::string cause;  // the failure that started it; "" when it admitted waiting newcomers
};

// Elastic mode: a lost rank (kPeerFailure, kTimeout, kAborted from a collective) no longer ends
// training. The Replica discards the step in progress, shrinks the communicator (admitting
// newcomers that wait to join), makes every rank hold the same parameters, registered state and
// step count, calls onChange and throws MembershipChanged. Sync mode only.
struct ElasticOptions {
  bool enabled = false;
  // Called on every rank after the change, before MembershipChanged is thrown: rescale the
  // learning rate or the batch here (the new communicator is already in place).
  std::function<void(const MembershipChange&)> onChange;
  // Every N optimizer steps the ranks agree (a one-integer all-reduce plus a store read) whether
  // newcomers wait to join and, if so, admit them without waiting for a failure. 0: only at
  // membership changes caused by failures.
  int admitJoinersEvery = 0;
  // A change that leaves fewer ranks is an Error (kPeerFailure) on the survivors.
  int minRanks = 1;
};

// Thrown by waitGradients, afterOptimizerStep, collective and ranksDifferingFromRoot in elastic
// mode once the membership changed and the replicas are consistent again. The step in progress
// was discarded: the gradient buffers are zero and the next call is beginStep of step
// `change.step + 1`. The state registered with addState may have been replaced by another
// rank's: read the data position from it, not from local variables.
class CHORUS_API MembershipChanged : public std::runtime_error {
 public:
  explicit MembershipChanged(MembershipChange c);
  MembershipChange change;
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
  int localSgdPeriod = 8;          // H, LocalSgd only
  CompressionOptions compression;  // Sync and Delayed modes
  DiLoCoOptions diloco;            // DiLoCo mode
  // Consistency check every N optimizer steps (0: never): a parameter hash in Sync and Delayed
  // (replicas must be bit-identical), the divergence in LocalSgd (and DiLoCo, at syncs).
  int checkEvery = 100;
  // LocalSgd and DiLoCo: a measured divergence above this is an Error on every rank.
  std::optional<double> divergenceLimit;
  // Receives one line per divergence measurement; unset: std::cerr on rank 0.
  std::function<void(const std::string&)> log;
  ElasticOptions elastic;
};

// One optimizer step; times in seconds. See docs/dp.md for the exact definitions.
struct StepMetrics {
  int64_t step = 0;               // optimizer steps completed, this one included
  double computeSeconds = 0;      // first beginStep to the synchronising waitGradients
  double commSeconds = 0;         // sum over buckets of launch to observed completion
  double exposedCommSeconds = 0;  // time blocked inside waitGradients
  uint64_t bytesReduced = 0;      // payload of the all-reduces launched this step
  // Bytes this rank sent this step in all of the Replica's collectives (wire bytes, after
  // compression).
  uint64_t bytesSent = 0;
  int buckets = 0;               // all-reduces launched this step
  int bucketsLaunchedEarly = 0;  // of those, launched from gradientReady (overlapping backward)
  // 2 max |p_r - mean of p| over elements and ranks (max |p_0 - p_1| with two ranks; docs/dp.md):
  // LocalSgd check steps, and DiLoCo syncs on check steps (measured before the sync)
  std::optional<double> divergence;

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
class CHORUS_API Replica {
 public:
  // Uses `comm`, which must outlive the Replica. Not in elastic mode (a change replaces the
  // communicator, so the Replica must own it).
  Replica(Communicator& comm, Options options = {});
  // Owns the communicator; required in elastic mode, where a membership change replaces it
  // (see communicator()).
  Replica(std::unique_ptr<Communicator> comm, Options options = {});
  // Waits for all-reduces still in flight (Delayed mode). When unwinding from an exception it
  // aborts the communicator instead, so peers fail at once rather than at their deadline.
  ~Replica();
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // Registers a tensor in model (forward) order; returns its index for gradientReady. The
  // buffers must outlive the Replica. A null `grad` lets the Replica hold the gradient
  // (gradient(index) after finalize): in Sync mode inside its bucket, which is then all-reduced
  // where backward accumulated it, with no copy into and out of a bucket, and in registered
  // memory on one host (read by the peers in place; not in elastic mode nor with compression).
  size_t addParameter(std::string name, float* param, float* grad, size_t count);
  // The same with the tensor's shape (count = the product): PowerSGD compresses a tensor of two
  // or more dimensions as a matrix of shape[0] rows and (product of the rest) columns.
  size_t addParameter(std::string name, float* param, float* grad, std::vector<size_t> shape);
  // Builds the buckets (reverse registration order, up to bucketBytes each). Call once.
  void finalize();
  // After finalize: where parameter `index`'s gradient lives (zeros at first; the caller adds
  // into it in backward and zeroes it between steps, as with its own). Stays valid, at the same
  // address, for the Replica's life, membership changes included.
  float* gradient(size_t index) const;
  // Copies root's parameters to every rank; returns when all ranks have them.
  void broadcastParameters(int root = 0);

  // More state to keep identical across ranks, copied with the parameters by synchronize() and
  // at membership changes: optimizer moments, the data position, counters. Same names, types and
  // sizes in the same order on every rank; the buffers must outlive the Replica.
  void addState(std::string name, float* data, size_t count);
  void addState(std::string name, int64_t* data, size_t count);
  // Collective: the ranks agree on the most advanced replica (most steps and collectives
  // completed; the lowest rank among equals) and copy its parameters, registered state and step
  // count to the others, unless a hash of all that content is the same on every rank (then only
  // the hashes travel). The first call makes every rank hold rank 0's state when all are equally
  // advanced: call it once at the start, after registering, and in a newcomer (a communicator
  // from Communicator::join) before its first step: it receives the running job's state.
  void synchronize();
  // Resuming from a checkpoint: sets the optimizer steps completed (before synchronize; the other
  // ranks receive it there).
  void restoreStep(int64_t step);

  // The communicator in use. In elastic mode a membership change replaces it: do not keep the
  // reference across calls that may throw MembershipChanged.
  Communicator& communicator() const;
  // Runs a collective of the caller's (evaluation, logging) on communicator(). In elastic mode a
  // failure in it leads to a membership change and MembershipChanged, as in waitGradients: redo
  // the work from the registered state.
  void collective(const std::function<void(Communicator&)>& fn);

  // Starts a micro-step.
  void beginStep();
  // Gradient `index` is final for this micro-step. Buckets launch in bucket order as soon as all
  // their gradients are ready, so ranks may report gradients in different orders. Do not touch
  // a reported gradient until waitGradients returns.
  void gradientReady(size_t index);
  // Ends the micro-step. Returns false on accumulation micro-steps (do not step the optimizer,
  // do not zero the gradients). Returns true on the last micro-step: the grad buffers hold the
  // gradients to apply; run the optimizer, call afterOptimizerStep, then zero the gradients.
  // Gradients never reported ready are taken as final here. Elastic mode: throws
  // MembershipChanged instead of a lost rank's Error (failures seen by gradientReady surface
  // here too, never inside backward).
  bool waitGradients();
  // Parameter averaging (LocalSgd), the periodic consistency check, and the step's metrics.
  // Elastic mode: the step counts as completed once this is called (the state registered with
  // addState must already be updated for it); it may throw MembershipChanged (a failure in the
  // check, or newcomers admitted), after which training continues with the next step.
  void afterOptimizerStep();

  // FNV-1a over the raw bytes of all registered parameters, and the ranks whose hash differs
  // from rank 0's (a collective: every rank must call it; in elastic mode it may throw
  // MembershipChanged like collective()).
  uint64_t parameterHash() const;
  std::vector<int> ranksDifferingFromRoot();

  int64_t step() const;  // optimizer steps completed
  const StepMetrics& lastMetrics() const;
  const std::vector<BucketInfo>& buckets() const;
  // Buckets launched so far in the current micro-step (to observe overlap).
  size_t launchedBuckets() const;

 private:
  struct CHORUS_HIDDEN Impl;  // src/dp/replica_impl.h
  std::unique_ptr<Impl> impl_;
};

}  // namespace chorus::dp
