// chorus-train's set-up and training loop (training.h); the report at the end is in
// training_report.cc.
#include "training.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "model.h"

namespace chorus::train {
namespace {

void setThreads(int threads) {
  torch::set_num_threads(threads);
  // Debian's LibTorch calls BLAS through libblas.so.3; with OpenBLAS behind it, its own thread
  // pool would oversubscribe the cores when several ranks share a host.
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    fn(threads);
  }
}

int64_t unixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// --fail-rank: the rank dies (or hangs) like a crashed process, telling nobody.
void failNow(const TrainOptions& o, int64_t step) {
  const char* how = o.failSignal == "stop"   ? "stops itself (SIGSTOP)"
                    : o.failSignal == "exit" ? "exits (_exit 17)"
                                             : "kills itself (SIGKILL)";
  std::fprintf(stderr,
               "chorus-train: rank %d (pid %d) %s in step %" PRId64 " at unix time %" PRId64
               " ms (--fail-rank)\n",
               o.failRank, static_cast<int>(getpid()), how, step, unixMillis());
  std::fflush(stderr);
  if (o.failSignal == "exit") _exit(17);  // no destructor tells the peers
  raise(o.failSignal == "stop" ? SIGSTOP : SIGKILL);
}

}  // namespace

Training::Training(const TrainOptions& o) : o_(o), threads_(o.threads) {
  if (threads_ == 0) {
    // The ranks on this host share its cores; every launcher says how many there are.
    const int localSize = std::max(1, chorus::launchInfoFromEnv().localSize);
    threads_ = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / localSize);
  }
  setThreads(threads_);
  torch::manual_seed(o.seed);
  // Adam's second moments underflow into denormals, which are ~50x slower on x86: flush them.
  at::globalContext().setFlushDenormal(true);

  // Before joining: a replacement keeps the survivors waiting only for its state.
  train_ = loadIdx(o.data, "train", o.limit);
  test_ = loadIdx(o.data, "t10k");

  // A replacement for a lost rank joins the running job.
  auto launched = chorus::Communicator::fromEnvOrJoin();
  const char* join = std::getenv("CHORUS_JOIN");
  newcomer_ = join != nullptr && std::string(join) == "1";
  const int startRank = launched->rank();
  const bool firstLife = std::getenv("CHORUS_RESTART") == nullptr && !newcomer_;
  failHere_ = firstLife && o.failRank == startRank && o.failStep > 0;
  resumeHere_ = o.resume && !newcomer_ && startRank == 0;

  model_ = makeModel(o.model);
  position_[kStartRanks] = launched->size();
  replica_ = std::make_unique<chorus::torch_dp::TorchReplica>(std::move(launched), *model_,
                                                              replicaOptions());
  optim_ =
      std::make_unique<TrainOptimizer>(o.optimizer, replica_->namedParameters(), o.lr, o.momentum);
  optimPtr_ = optim_.get();
  registerState();
  entries_ = checkpointEntries();
}

// Elastic policy: every rank keeps its batch, so the global batch follows the world size, and
// the learning rate follows it too (linear scaling from the size the job started with).
double Training::scaledLr(int ranks) const {
  return o_.lr * static_cast<double>(ranks) / static_cast<double>(position_[kStartRanks]);
}

chorus::dp::Options Training::replicaOptions() {
  chorus::dp::Options dpo;
  dpo.bucketBytes = std::max<size_t>(4, static_cast<size_t>(o_.bucketMb * 1024 * 1024));
  dpo.minBuckets = o_.minBuckets;
  dpo.accumulationSteps = o_.accumulation;
  dpo.mode = o_.mode == "delayed"     ? chorus::dp::Mode::kDelayed
             : o_.mode == "local-sgd" ? chorus::dp::Mode::kLocalSgd
             : o_.mode == "diloco"    ? chorus::dp::Mode::kDiLoCo
                                      : chorus::dp::Mode::kSync;
  dpo.localSgdPeriod = o_.localSgdPeriod;
  dpo.compression = chorus::dp::parseCompression(o_.compress);
  dpo.diloco.syncEvery = o_.syncEvery;
  dpo.diloco.outerLr = o_.outerLr;
  dpo.diloco.outerMomentum = o_.outerMomentum;
  dpo.diloco.fragments = o_.fragments;
  dpo.checkEvery = o_.checkEvery;
  dpo.elastic.enabled = o_.elastic;
  dpo.elastic.minRanks = o_.minRanks;
  dpo.elastic.admitJoinersEvery = o_.admitEvery;
  dpo.elastic.onChange = [this](const chorus::dp::MembershipChange& c) {
    if (optimPtr_ != nullptr) {
      optimPtr_->setStepCount(c.step);
      optimPtr_->setLearningRate(scaledLr(c.newSize));
    }
  };
  return dpo;
}

// What a membership change copies from a healthy rank besides the parameters.
void Training::registerState() {
  for (const auto& [name, t] : optim_->stateTensors()) {
    replica_->replica().addState("optimizer/" + name, t.data_ptr<float>(),
                                 static_cast<size_t>(t.numel()));
  }
  replica_->replica().addState("trainer/position", position_, kFields);
  replica_->replica().addState("trainer/accuracy", accuracy_, 1);
}

std::vector<CheckpointEntry> Training::checkpointEntries() {
  std::vector<CheckpointEntry> e;
  for (const auto& [name, t] : replica_->namedParameters()) {
    e.push_back({"param/" + name, CheckpointEntry::Type::kF32, t.data_ptr<float>(),
                 static_cast<size_t>(t.numel())});
  }
  for (const auto& [name, t] : optim_->stateTensors()) {
    e.push_back({"optimizer/" + name, CheckpointEntry::Type::kF32, t.data_ptr<float>(),
                 static_cast<size_t>(t.numel())});
  }
  e.push_back({"trainer/position", CheckpointEntry::Type::kI64, position_, kFields});
  e.push_back({"trainer/accuracy", CheckpointEntry::Type::kF32, accuracy_, 1});
  e.push_back({"trainer/step", CheckpointEntry::Type::kI64, &stepOnDisk_, 1});
  return e;
}

void Training::resumeFromCheckpoint() {
  const std::string path = newestCheckpoint(o_.checkpointDir);
  if (path.empty()) {
    std::printf("chorus-train: no checkpoint in %s, starting afresh\n", o_.checkpointDir.c_str());
  } else {
    readCheckpoint(path, entries_);
    replica_->replica().restoreStep(stepOnDisk_);
    std::printf("chorus-train: resumed from %s (step %" PRId64 ", epoch %" PRId64 ")\n",
                path.c_str(), stepOnDisk_, position_[kEpoch]);
  }
  std::fflush(stdout);
}

void Training::printStart() const {
  if (replica_->communicator().rank() != 0) return;
  const int ranks = replica_->communicator().size();
  std::string mode = o_.mode;
  if (o_.mode == "diloco") {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  " (sync every %d steps, outer lr %g, outer momentum %g, %d fragment(s))",
                  o_.syncEvery, o_.outerLr, o_.outerMomentum, o_.fragments);
    mode += buf;
  } else if (o_.mode == "local-sgd") {
    mode += " (average every " + std::to_string(o_.localSgdPeriod) + " steps)";
  }
  if (o_.compress != "none") mode += ", compression " + o_.compress;
  std::printf(
      "chorus-train: %d ranks, %s (%zu tensors, %zu parameters, %zu buckets), %s lr %g, batch "
      "%d per rank x %d ranks x %d accumulation, mode %s, %zu training samples, %d thread(s) "
      "per rank%s\n",
      ranks, o_.model.c_str(), replica_->parameterCount(), replica_->parameterElements(),
      replica_->replica().buckets().size(), o_.optimizer.c_str(), optim_->learningRate(), o_.batch,
      ranks, o_.accumulation, mode.c_str(), train_.count, threads_,
      newcomer_    ? " (joined a running job)"
      : o_.elastic ? ", elastic"
                   : "");
  std::fflush(stdout);
}

int Training::run() {
  if (resumeHere_) resumeFromCheckpoint();
  // Rank 0's parameters and state to everyone (a replacement: the running job's state).
  try {
    replica_->synchronize();
  } catch (const chorus::dp::MembershipChanged&) {  // synchronised all the same
  }
  optim_->setStepCount(replica_->replica().step());
  optim_->setLearningRate(scaledLr(replica_->communicator().size()));
  printStart();

  start_ = Clock::now();
  for (;;) {
    try {
      if (reachedTheEnd()) break;
      startEpochStatistics();
      if (static_cast<size_t>(position_[kPos]) >= train_.count) {
        endEpoch();
      } else {
        trainStep();
      }
    } catch (const chorus::dp::MembershipChanged& e) {
      // Every rank now holds the same parameters, optimizer state and position; the step in
      // progress was dropped and the gradients are zero: go on from the registered position.
      pendingChange_ = e.change;
      reportMembershipChange(e.change);
    }
  }
  const double total = std::chrono::duration<double>(Clock::now() - start_).count();

  averageDriftingReplicas();
  auto& rep = replica_->replica();
  if (replica_->communicator().rank() == 0 && !o_.checkpointDir.empty() &&
      stepOnDisk_ != rep.step()) {
    stepOnDisk_ = rep.step();
    writeCheckpoint(o_.checkpointDir, stepOnDisk_, entries_);
  }
  const std::vector<int> differ = ranksDifferingFromRoot();
  printSummary(differ, total);
  return differ.empty() ? 0 : 3;
}

// Evaluates the test set (a collective), keeping its time out of the training time.
double Training::evaluateTimed(chorus::Communicator& c) {
  const auto t0 = Clock::now();
  const double acc = evaluate(model_, test_, c);
  evalSeconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
  return acc;
}

bool Training::reachedTheEnd() {
  auto& rep = replica_->replica();
  const bool stepLimit =
      (o_.maxSteps > 0 && rep.step() >= o_.maxSteps) || targetReachedAt_.has_value();
  if (position_[kEpoch] <= o_.epochs && !stepLimit) return false;
  // Stopped within an epoch: evaluate once more, so the run ends with an accuracy.
  if (stepLimit && position_[kPos] != 0 && position_[kEvaluatedAt] != rep.step()) {
    double acc = 0;
    rep.collective([&](chorus::Communicator& c) { acc = evaluateTimed(c); });
    accuracy_[0] = static_cast<float>(acc);
    position_[kEvaluatedAt] = rep.step();
    if (!rows_.empty()) rows_.back().accuracy = acc;
  }
  return true;
}

void Training::startEpochStatistics() {
  if (statsEpoch_ == position_[kEpoch]) return;
  statsEpoch_ = position_[kEpoch];
  epochLoss_ = 0;
  epochBatches_ = 0;
  epochStart_ = Clock::now();
  const bool root = replica_->communicator().rank() == 0;
  progress_ = std::make_unique<Progress>(root && o_.progress, static_cast<int>(statsEpoch_),
                                         o_.epochs, train_.count);
}

void Training::endEpoch() {
  auto& rep = replica_->replica();
  const size_t n = train_.count;
  double acc = 0;
  const double secs = std::chrono::duration<double>(Clock::now() - epochStart_).count();
  if (position_[kEvaluatedAt] == rep.step() && !rows_.empty() && rows_.back().accuracy >= 0) {
    acc = rows_.back().accuracy;  // --eval-every evaluated after this very step
  } else {
    rep.collective([&](chorus::Communicator& c) { acc = evaluateTimed(c); });
    position_[kEvaluatedAt] = rep.step();
  }
  accuracy_[0] = static_cast<float>(acc);
  if (!rows_.empty() && rows_.back().epoch == position_[kEpoch]) rows_.back().accuracy = acc;
  if (replica_->communicator().rank() == 0) {
    std::printf("epoch %" PRId64
                ": train loss %.4f (rank 0), %.1f s, %.0f samples/s, test accuracy %.2f%%\n",
                position_[kEpoch],
                epochLoss_ / static_cast<double>(std::max<size_t>(epochBatches_, 1)), secs,
                static_cast<double>(n) / secs, 100.0 * acc);
    std::fflush(stdout);
  }
  position_[kEpoch] += 1;
  position_[kPos] = 0;
}

void Training::trainStep() {
  auto& rep = replica_->replica();
  chorus::Communicator& comm = replica_->communicator();
  const int rank = comm.rank(), ranks = comm.size();
  if (orderEpoch_ != position_[kEpoch]) {
    orderEpoch_ = position_[kEpoch];
    order_ = epochOrder(train_.count, o_.seed, static_cast<int>(orderEpoch_), true);
  }
  size_t pos = static_cast<size_t>(position_[kPos]);
  double stepLoss = 0;
  for (int k = 0; k < o_.accumulation; ++k) {
    auto batch = batchAt(order_, pos, rank, ranks, static_cast<size_t>(o_.batch));
    pos = batch.nextPos;
    auto [x, y] = makeBatch(train_, batch.indices.data(), batch.indices.size());
    replica_->beginStep();
    auto loss = torch::nn::functional::cross_entropy(model_->forward(x), y);
    if (failHere_ && rep.step() + 1 == o_.failStep) failNow(o_, o_.failStep);
    loss.backward();
    hookReports_ += replica_->hookReports();
    expectedReports_ += replica_->parameterCount();
    stepLoss += loss.item<double>();
    replica_->waitGradients();  // true on the last micro-step only
  }
  optim_->step();
  // The step's data is consumed: recorded before the step counts as completed.
  position_[kPos] = static_cast<int64_t>(pos);
  replica_->afterOptimizerStep();
  replica_->zeroGradients();
  epochLoss_ += stepLoss;
  epochBatches_ += static_cast<size_t>(o_.accumulation);
  const double wall = std::chrono::duration<double>(Clock::now() - start_).count();
  rows_.push_back({rep.step(), static_cast<int>(position_[kEpoch]), stepLoss / o_.accumulation,
                   replica_->lastMetrics(), wall, wall - evalSeconds_, -1});
  evaluatePeriodically(wall);
  afterStep(pos);
}

// --eval-every, and --target-accuracy's stop.
void Training::evaluatePeriodically(double wall) {
  auto& rep = replica_->replica();
  if (o_.evalEvery <= 0 || rep.step() % o_.evalEvery != 0) return;
  const bool root = replica_->communicator().rank() == 0;
  double acc = 0;
  rep.collective([&](chorus::Communicator& c) { acc = evaluateTimed(c); });
  position_[kEvaluatedAt] = rep.step();
  accuracy_[0] = static_cast<float>(acc);
  rows_.back().accuracy = acc;
  if (root && !o_.progress) {
    std::printf("step %" PRId64 ": test accuracy %.2f%% after %.1f s of training\n", rep.step(),
                100.0 * acc, rows_.back().trainSeconds);
    std::fflush(stdout);
  }
  // The accuracy is the same on every rank (summed counts): all stop at the same step.
  if (o_.targetAccuracy > 0 && acc >= o_.targetAccuracy && !targetReachedAt_) {
    targetReachedAt_ = rows_.back().trainSeconds;
    if (root) {
      std::printf("target accuracy %.2f%% reached at step %" PRId64
                  " after %.2f s of training (%.2f s with evaluations): test accuracy %.2f%%\n",
                  100.0 * o_.targetAccuracy, rep.step(), *targetReachedAt_, wall, 100.0 * acc);
      std::fflush(stdout);
    }
  }
}

// The first step of a new membership, the periodic checkpoint and the progress line.
void Training::afterStep(size_t pos) {
  auto& rep = replica_->replica();
  const bool root = replica_->communicator().rank() == 0;
  if (pendingChange_) {
    if (root) {
      std::printf("chorus-train: first step of the new membership completed (step %" PRId64
                  ", %d ranks, generation %" PRIu64 ") at unix time %" PRId64 " ms\n",
                  rep.step(), replica_->communicator().size(), pendingChange_->generation,
                  unixMillis());
      std::fflush(stdout);
    }
    pendingChange_.reset();
  }
  if (root && !o_.checkpointDir.empty() && rep.step() % o_.checkpointEvery == 0) {
    stepOnDisk_ = rep.step();
    writeCheckpoint(o_.checkpointDir, stepOnDisk_, entries_);
  }
  const double secs = std::chrono::duration<double>(Clock::now() - epochStart_).count();
  const size_t done = std::min(train_.count, pos);
  progress_->update(done, epochLoss_ / static_cast<double>(std::max<size_t>(epochBatches_, 1)),
                    secs > 0 ? static_cast<double>(done) / secs : 0);
}

void Training::reportMembershipChange(const chorus::dp::MembershipChange& c) const {
  if (replica_->communicator().rank() != 0) return;
  std::string lost, former;
  for (int r : c.lostRanks) lost += (lost.empty() ? "" : ",") + std::to_string(r);
  for (int r : c.formerRanks) former += (former.empty() ? "" : ",") + std::to_string(r);
  std::printf("chorus-train: membership change before step %" PRId64
              ": %d -> %d ranks (generation %" PRIu64
              ", former ranks %s, lost %s, %d joined, state %s); lr %g, global batch %d\n",
              c.step + 1, c.oldSize, c.newSize, c.generation, former.c_str(),
              lost.empty() ? "none" : lost.c_str(), c.joined,
              c.stateSource < 0 ? "already identical"
                                : ("from rank " + std::to_string(c.stateSource)).c_str(),
              optim_->learningRate(), o_.batch * c.newSize * o_.accumulation);
  std::fflush(stdout);
}

}  // namespace chorus::train
