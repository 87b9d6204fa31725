// chorus-train: data-parallel training of Fashion-MNIST with LibTorch, gradients averaged by
// chorus::dp through TorchReplica. Run under chorus-run; see docs/dp.md.
#include <dlfcn.h>
#include <malloc.h>
#include <torch/torch.h>
#include <unistd.h>
#include <chorus/chorus.hpp>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint.h"
#include "data.h"
#include "metrics_file.h"
#include "optimizer_state.h"
#include "options.h"
#include "torch_replica.h"

namespace {

using chorus::train::Dataset;
using chorus::train::Progress;
using chorus::train::Row;
using chorus::train::TrainOptions;
using Clock = std::chrono::steady_clock;

constexpr float kMean = 0.2860f;  // Fashion-MNIST pixel mean and standard deviation
constexpr float kStd = 0.3530f;

torch::nn::Sequential makeModel(const std::string& name) {
  namespace nn = torch::nn;
  if (name == "cnn") {
    return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 16, 5).padding(2)), nn::ReLU(),
                          nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(16, 32, 5).padding(2)),
                          nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Linear(32 * 7 * 7, 128),
                          nn::ReLU(), nn::Linear(128, 10));
  }
  return nn::Sequential(nn::Flatten(), nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 256),
                        nn::ReLU(), nn::Linear(256, 10));
}

// Normalised images [B, 1, 28, 28] and labels [B] for the given sample indices.
std::pair<torch::Tensor, torch::Tensor> makeBatch(const Dataset& d, const size_t* idx, size_t n) {
  auto x = torch::empty({static_cast<int64_t>(n), 1, 28, 28}, torch::kFloat);
  auto y = torch::empty({static_cast<int64_t>(n)}, torch::kLong);
  float* xp = x.data_ptr<float>();
  int64_t* yp = y.data_ptr<int64_t>();
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* img = d.images.data() + idx[i] * Dataset::kPixels;
    for (size_t k = 0; k < Dataset::kPixels; ++k) {
      xp[i * Dataset::kPixels + k] = (static_cast<float>(img[k]) / 255.0f - kMean) / kStd;
    }
    yp[i] = d.labels[idx[i]];
  }
  return {x, y};
}

// Test accuracy: each rank evaluates its shard (no padding), the counts are summed.
double evaluate(torch::nn::Sequential& model, const Dataset& test, chorus::Communicator& comm) {
  torch::NoGradGuard guard;
  model->eval();
  int64_t counts[2] = {0, 0};  // correct, seen
  std::vector<size_t> idx;
  for (size_t i = static_cast<size_t>(comm.rank()); i < test.count;
       i += static_cast<size_t>(comm.size())) {
    idx.push_back(i);
  }
  for (size_t b = 0; b < idx.size(); b += 500) {
    size_t n = std::min<size_t>(500, idx.size() - b);
    auto [x, y] = makeBatch(test, idx.data() + b, n);
    auto pred = model->forward(x).argmax(1);
    counts[0] += pred.eq(y).sum().item<int64_t>();
    counts[1] += static_cast<int64_t>(n);
  }
  comm.allReduce(std::span<int64_t>(counts, 2), chorus::ReduceOp::kSum).wait();
  model->train();
  return counts[1] == 0 ? 0.0 : static_cast<double>(counts[0]) / static_cast<double>(counts[1]);
}

void setThreads(int threads) {
  torch::set_num_threads(threads);
  // Debian's LibTorch calls BLAS through libblas.so.3; with OpenBLAS behind it, its own thread
  // pool would oversubscribe the cores when several ranks share a host.
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    fn(threads);
  }
}

// The trainer's progress: identical on every rank (registered with the Replica, so a membership
// change copies it with the parameters) and written to checkpoints.
// kEvaluatedAt: the step after which the last evaluation outside an epoch's end ran.
enum Field : size_t { kEpoch, kPos, kStartRanks, kEvaluatedAt, kFields };

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

std::vector<chorus::train::CheckpointEntry> checkpointEntries(
    chorus::torch_dp::TorchReplica& replica, const chorus::train::TrainOptimizer& optim,
    int64_t* position, float* accuracy, int64_t* step) {
  using chorus::train::CheckpointEntry;
  std::vector<CheckpointEntry> e;
  for (const auto& [name, t] : replica.namedParameters()) {
    e.push_back({"param/" + name, CheckpointEntry::Type::kF32, t.data_ptr<float>(),
                 static_cast<size_t>(t.numel())});
  }
  for (const auto& [name, t] : optim.stateTensors()) {
    e.push_back({"optimizer/" + name, CheckpointEntry::Type::kF32, t.data_ptr<float>(),
                 static_cast<size_t>(t.numel())});
  }
  e.push_back({"trainer/position", CheckpointEntry::Type::kI64, position, kFields});
  e.push_back({"trainer/accuracy", CheckpointEntry::Type::kF32, accuracy, 1});
  e.push_back({"trainer/step", CheckpointEntry::Type::kI64, step, 1});
  return e;
}

int run(const TrainOptions& o) {
  int threads = o.threads;
  if (threads == 0) {
    // The ranks on this host share its cores; every launcher says how many there are.
    const int localSize = std::max(1, chorus::launchInfoFromEnv().localSize);
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / localSize);
  }
  setThreads(threads);
  torch::manual_seed(o.seed);
  // Adam's second moments underflow into denormals, which are ~50x slower on x86: flush them.
  at::globalContext().setFlushDenormal(true);

  // Before joining: a replacement keeps the survivors waiting only for its state.
  Dataset train = chorus::train::loadIdx(o.data, "train", o.limit);
  Dataset test = chorus::train::loadIdx(o.data, "t10k");

  auto launched = chorus::Communicator::fromEnv();
  // A replacement for a lost rank (fromEnv() called Communicator::join).
  const char* join = std::getenv("CHORUS_JOIN");
  const bool newcomer = join != nullptr && std::string(join) == "1";
  const int startRank = launched->rank();
  const bool firstLife = std::getenv("CHORUS_RESTART") == nullptr && !newcomer;
  const bool failHere = firstLife && o.failRank == startRank && o.failStep > 0;
  const bool resumeHere = o.resume && !newcomer && startRank == 0;

  auto model = makeModel(o.model);
  int64_t position[kFields] = {1, 0, launched->size(), -1};
  float accuracy[1] = {-1};
  chorus::train::TrainOptimizer* optimPtr = nullptr;
  chorus::dp::Options dpo;
  dpo.bucketBytes = std::max<size_t>(4, static_cast<size_t>(o.bucketMb * 1024 * 1024));
  dpo.minBuckets = o.minBuckets;
  dpo.accumulationSteps = o.accumulation;
  dpo.mode = o.mode == "delayed"     ? chorus::dp::Mode::kDelayed
             : o.mode == "local-sgd" ? chorus::dp::Mode::kLocalSgd
             : o.mode == "diloco"    ? chorus::dp::Mode::kDiLoCo
                                     : chorus::dp::Mode::kSync;
  dpo.localSgdPeriod = o.localSgdPeriod;
  dpo.compression = chorus::dp::parseCompression(o.compress);
  dpo.diloco.syncEvery = o.syncEvery;
  dpo.diloco.outerLr = o.outerLr;
  dpo.diloco.outerMomentum = o.outerMomentum;
  dpo.diloco.fragments = o.fragments;
  // Local-sgd and diloco replicas drift apart between syncs; sync and delayed must not.
  const bool replicasDrift =
      dpo.mode == chorus::dp::Mode::kLocalSgd || dpo.mode == chorus::dp::Mode::kDiLoCo;
  dpo.checkEvery = o.checkEvery;
  // Elastic policy: every rank keeps its batch, so the global batch follows the world size, and
  // the learning rate follows it too (linear scaling from the size the job started with).
  auto scaledLr = [&](int ranks) {
    return o.lr * static_cast<double>(ranks) / static_cast<double>(position[kStartRanks]);
  };
  dpo.elastic.enabled = o.elastic;
  dpo.elastic.minRanks = o.minRanks;
  dpo.elastic.admitJoinersEvery = o.admitEvery;
  dpo.elastic.onChange = [&](const chorus::dp::MembershipChange& c) {
    if (optimPtr != nullptr) {
      optimPtr->setStepCount(c.step);
      optimPtr->setLearningRate(scaledLr(c.newSize));
    }
  };
  chorus::torch_dp::TorchReplica replica(std::move(launched), *model, dpo);
  chorus::train::TrainOptimizer optim(o.optimizer, replica.namedParameters(), o.lr, o.momentum);
  optimPtr = &optim;
  for (const auto& [name, t] : optim.stateTensors()) {
    replica.replica().addState("optimizer/" + name, t.data_ptr<float>(),
                               static_cast<size_t>(t.numel()));
  }
  replica.replica().addState("trainer/position", position, kFields);
  replica.replica().addState("trainer/accuracy", accuracy, 1);
  int64_t stepOnDisk = 0;
  const auto entries = checkpointEntries(replica, optim, position, accuracy, &stepOnDisk);

  if (resumeHere) {
    const std::string path = chorus::train::newestCheckpoint(o.checkpointDir);
    if (path.empty()) {
      std::printf("chorus-train: no checkpoint in %s, starting afresh\n", o.checkpointDir.c_str());
    } else {
      chorus::train::readCheckpoint(path, entries);
      replica.replica().restoreStep(stepOnDisk);
      std::printf("chorus-train: resumed from %s (step %" PRId64 ", epoch %" PRId64 ")\n",
                  path.c_str(), stepOnDisk, position[kEpoch]);
    }
    std::fflush(stdout);
  }
  // Rank 0's parameters and state to everyone (a replacement: the running job's state).
  try {
    replica.synchronize();
  } catch (const chorus::dp::MembershipChanged&) {  // synchronised all the same
  }
  optim.setStepCount(replica.replica().step());
  optim.setLearningRate(scaledLr(replica.communicator().size()));

  if (replica.communicator().rank() == 0) {
    const int ranks = replica.communicator().size();
    std::string mode = o.mode;
    if (o.mode == "diloco") {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    " (sync every %d steps, outer lr %g, outer momentum %g, %d fragment(s))",
                    o.syncEvery, o.outerLr, o.outerMomentum, o.fragments);
      mode += buf;
    } else if (o.mode == "local-sgd") {
      mode += " (average every " + std::to_string(o.localSgdPeriod) + " steps)";
    }
    if (o.compress != "none") mode += ", compression " + o.compress;
    std::printf(
        "chorus-train: %d ranks, %s (%zu tensors, %zu parameters, %zu buckets), %s lr %g, batch "
        "%d per rank x %d ranks x %d accumulation, mode %s, %zu training samples, %d thread(s) "
        "per rank%s\n",
        ranks, o.model.c_str(), replica.parameterCount(), replica.parameterElements(),
        replica.replica().buckets().size(), o.optimizer.c_str(), optim.learningRate(), o.batch,
        ranks, o.accumulation, mode.c_str(), train.count, threads,
        newcomer    ? " (joined a running job)"
        : o.elastic ? ", elastic"
                    : "");
    std::fflush(stdout);
  }

  std::vector<Row> rows;
  size_t hookReports = 0, expectedReports = 0;
  const auto start = Clock::now();
  double evalSeconds = 0;  // spent evaluating: left out of the training time
  auto sinceStart = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  // Evaluates the test set (a collective), keeping its time out of the training time.
  auto evaluateTimed = [&](chorus::Communicator& c) {
    const auto t0 = Clock::now();
    const double acc = evaluate(model, test, c);
    evalSeconds += std::chrono::duration<double>(Clock::now() - t0).count();
    return acc;
  };
  std::optional<double> targetReachedAt;  // training seconds when --target-accuracy was reached
  std::vector<size_t> order;
  int64_t orderEpoch = -1;
  // This rank's statistics of the current epoch (rank 0 prints them).
  int64_t statsEpoch = -1;
  double epochLoss = 0;
  size_t epochBatches = 0;
  Clock::time_point epochStart;
  std::unique_ptr<Progress> progress;
  // Set when a membership change happened: the first step completed afterwards is reported.
  std::optional<chorus::dp::MembershipChange> pendingChange;
  auto& rep = replica.replica();
  for (;;) {
    try {
      chorus::Communicator& comm = replica.communicator();
      const int rank = comm.rank(), ranks = comm.size();
      const bool root = rank == 0;
      const bool stepLimit =
          (o.maxSteps > 0 && rep.step() >= o.maxSteps) || targetReachedAt.has_value();
      if (position[kEpoch] > o.epochs || stepLimit) {
        // Stopped within an epoch: evaluate once more, so the run ends with an accuracy.
        if (stepLimit && position[kPos] != 0 && position[kEvaluatedAt] != rep.step()) {
          double acc = 0;
          rep.collective([&](chorus::Communicator& c) { acc = evaluateTimed(c); });
          accuracy[0] = static_cast<float>(acc);
          position[kEvaluatedAt] = rep.step();
          if (!rows.empty()) rows.back().accuracy = acc;
        }
        break;
      }
      if (statsEpoch != position[kEpoch]) {
        statsEpoch = position[kEpoch];
        epochLoss = 0;
        epochBatches = 0;
        epochStart = Clock::now();
        progress = std::make_unique<Progress>(root && o.progress, static_cast<int>(statsEpoch),
                                              o.epochs, train.count);
      }
      const size_t n = train.count;
      if (static_cast<size_t>(position[kPos]) >= n) {
        double acc = 0;
        const double secs = std::chrono::duration<double>(Clock::now() - epochStart).count();
        if (position[kEvaluatedAt] == rep.step() && !rows.empty() && rows.back().accuracy >= 0) {
          acc = rows.back().accuracy;  // --eval-every evaluated after this very step
        } else {
          rep.collective([&](chorus::Communicator& c) { acc = evaluateTimed(c); });
          position[kEvaluatedAt] = rep.step();
        }
        accuracy[0] = static_cast<float>(acc);
        if (!rows.empty() && rows.back().epoch == position[kEpoch]) rows.back().accuracy = acc;
        if (root) {
          std::printf("epoch %" PRId64
                      ": train loss %.4f (rank 0), %.1f s, %.0f samples/s, test accuracy "
                      "%.2f%%\n",
                      position[kEpoch],
                      epochLoss / static_cast<double>(std::max<size_t>(epochBatches, 1)), secs,
                      static_cast<double>(n) / secs, 100.0 * acc);
          std::fflush(stdout);
        }
        position[kEpoch] += 1;
        position[kPos] = 0;
        continue;
      }
      if (orderEpoch != position[kEpoch]) {
        orderEpoch = position[kEpoch];
        order = chorus::train::epochOrder(n, o.seed, static_cast<int>(orderEpoch), true);
      }
      size_t pos = static_cast<size_t>(position[kPos]);
      double stepLoss = 0;
      for (int k = 0; k < o.accumulation; ++k) {
        auto batch = chorus::train::batchAt(order, pos, rank, ranks, static_cast<size_t>(o.batch));
        pos = batch.nextPos;
        auto [x, y] = makeBatch(train, batch.indices.data(), batch.indices.size());
        replica.beginStep();
        auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
        if (failHere && rep.step() + 1 == o.failStep) failNow(o, o.failStep);
        loss.backward();
        hookReports += replica.hookReports();
        expectedReports += replica.parameterCount();
        stepLoss += loss.item<double>();
        replica.waitGradients();  // true on the last micro-step only
      }
      optim.step();
      // The step's data is consumed: recorded before the step counts as completed.
      position[kPos] = static_cast<int64_t>(pos);
      replica.afterOptimizerStep();
      replica.zeroGradients();
      epochLoss += stepLoss;
      epochBatches += static_cast<size_t>(o.accumulation);
      const double wall = sinceStart();
      rows.push_back({rep.step(), static_cast<int>(position[kEpoch]), stepLoss / o.accumulation,
                      replica.lastMetrics(), wall, wall - evalSeconds, -1});
      if (o.evalEvery > 0 && rep.step() % o.evalEvery == 0) {
        double acc = 0;
        rep.collective([&](chorus::Communicator& c) { acc = evaluateTimed(c); });
        position[kEvaluatedAt] = rep.step();
        accuracy[0] = static_cast<float>(acc);
        rows.back().accuracy = acc;
        if (root && !o.progress) {
          std::printf("step %" PRId64 ": test accuracy %.2f%% after %.1f s of training\n",
                      rep.step(), 100.0 * acc, rows.back().trainSeconds);
          std::fflush(stdout);
        }
        // The accuracy is the same on every rank (summed counts): all stop at the same step.
        if (o.targetAccuracy > 0 && acc >= o.targetAccuracy && !targetReachedAt) {
          targetReachedAt = rows.back().trainSeconds;
          if (root) {
            std::printf("target accuracy %.2f%% reached at step %" PRId64
                        " after %.2f s of training (%.2f s with evaluations): test accuracy "
                        "%.2f%%\n",
                        100.0 * o.targetAccuracy, rep.step(), *targetReachedAt, wall, 100.0 * acc);
            std::fflush(stdout);
          }
        }
      }
      if (pendingChange) {
        if (root) {
          std::printf("chorus-train: first step of the new membership completed (step %" PRId64
                      ", %d ranks, generation %" PRIu64 ") at unix time %" PRId64 " ms\n",
                      rep.step(), ranks, pendingChange->generation, unixMillis());
          std::fflush(stdout);
        }
        pendingChange.reset();
      }
      if (root && !o.checkpointDir.empty() && rep.step() % o.checkpointEvery == 0) {
        stepOnDisk = rep.step();
        chorus::train::writeCheckpoint(o.checkpointDir, stepOnDisk, entries);
      }
      const double secs = std::chrono::duration<double>(Clock::now() - epochStart).count();
      const size_t done = std::min(n, pos);
      progress->update(done, epochLoss / static_cast<double>(std::max<size_t>(epochBatches, 1)),
                       secs > 0 ? static_cast<double>(done) / secs : 0);
    } catch (const chorus::dp::MembershipChanged& e) {
      // Every rank now holds the same parameters, optimizer state and position; the step in
      // progress was dropped and the gradients are zero: go on from the registered position.
      pendingChange = e.change;
      const auto& c = e.change;
      if (replica.communicator().rank() == 0) {
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
                    optim.learningRate(), o.batch * c.newSize * o.accumulation);
        std::fflush(stdout);
      }
    }
  }
  const double total = std::chrono::duration<double>(Clock::now() - start).count();

  if (replicasDrift) {
    // The replicas drift between syncs; end on their average, and evaluate that model.
    const bool averaged = replica.averageParameters();
    double acc = 0;
    rep.collective([&](chorus::Communicator& c) { acc = evaluate(model, test, c); });
    if (replica.communicator().rank() == 0 && averaged) {
      std::printf(
          "%s: parameters averaged once more at the end (test accuracy %.2f%% before, "
          "%.2f%% after)\n",
          o.mode.c_str(), 100.0 * accuracy[0], 100.0 * acc);
    } else if (replica.communicator().rank() == 0) {
      std::printf(
          "%s: replicas identical at the end (a sync was the last step): nothing averaged\n",
          o.mode.c_str());
    }
    accuracy[0] = static_cast<float>(acc);
  }
  if (replica.communicator().rank() == 0 && !o.checkpointDir.empty() && stepOnDisk != rep.step()) {
    stepOnDisk = rep.step();
    chorus::train::writeCheckpoint(o.checkpointDir, stepOnDisk, entries);
  }
  std::vector<int> differ;
  for (;;) {
    try {
      differ = replica.ranksDifferingFromRoot();
      break;
    } catch (const chorus::dp::MembershipChanged&) {  // check again among the new membership
    }
  }
  auto& finalComm = replica.communicator();
  const int ranks = finalComm.size();
  if (finalComm.rank() == 0) {
    std::printf("gradients reported by autograd hooks: %zu of %zu (rest taken as final at wait)\n",
                hookReports, expectedReports);
    std::printf(
        "final test accuracy %.2f%%, %.1f s in total (%.1f s training, %.1f s evaluating)\n",
        100.0 * accuracy[0], total, total - evalSeconds, evalSeconds);
    uint64_t sent = 0, reduced = 0;
    for (const auto& r : rows) sent += r.m.bytesSent, reduced += r.m.bytesReduced;
    const double stepsDone = static_cast<double>(std::max<size_t>(rows.size(), 1));
    std::printf(
        "bytes sent per rank per step: %.0f (rank 0, mean over %zu steps; %.0f bytes of "
        "gradients and parameters reduced), %.1f MB in all\n",
        static_cast<double>(sent) / stepsDone, rows.size(),
        static_cast<double>(reduced) / stepsDone, static_cast<double>(sent) / 1e6);
    if (o.targetAccuracy > 0 && !targetReachedAt) {
      std::printf("target accuracy %.2f%% not reached\n", 100.0 * o.targetAccuracy);
    }
    if (differ.empty()) {
      std::printf("parameters identical on all %d ranks (hash %016" PRIx64 ")\n", ranks,
                  replica.parameterHash());
    } else {
      std::string list;
      for (int r : differ) list += (list.empty() ? "" : ", ") + std::to_string(r);
      std::printf("parameters DIFFER: rank(s) %s differ from rank 0 (of %d ranks)\n", list.c_str(),
                  ranks);
    }
    // Who reached the all-reduces last, as rank 0 saw it: a rank that is last in most calls by
    // more than a millisecond is slow before the call (compute, input), not in the network.
    const chorus::StragglerReport stragglers = finalComm.stragglerReport();
    std::fputs(stragglers.summary().c_str(), stdout);
    for (const auto& r : stragglers.ranks) {
      if (r.lastFraction >= 0.5 && r.lagSamples > 0 && r.medianLagMs >= 1.0) {
        std::printf(
            "rank %d reaches the all-reduces late in most steps: its compute or input is "
            "slower, not the network\n",
            r.rank);
      }
    }
    double waitSum = 0, transferSum = 0;
    for (const auto& r : rows)
      waitSum += r.m.waitForSlowestSeconds, transferSum += r.m.transferSeconds;
    std::printf(
        "all-reduce time over %zu steps (rank 0): %.3f s waiting for the slowest rank, "
        "%.3f s moving bytes\n",
        rows.size(), waitSum, transferSum);
    std::fflush(stdout);
    if (!o.metrics.empty() || !o.plot.empty()) {
      std::string csv = o.metrics.empty() ? o.plot + ".csv" : o.metrics;
      writeCsv(csv, rows);
      std::printf("metrics: %s (%zu steps)\n", csv.c_str(), rows.size());
      if (!o.plot.empty()) {
        if (access("/usr/bin/python3", X_OK) != 0) {
          std::printf("plot: skipped, /usr/bin/python3 not found\n");
        } else {
          std::string cmd = std::string("/usr/bin/python3 '") + CHORUS_TRAIN_PLOT_SCRIPT + "' '" +
                            csv + "' '" + o.plot + "'";
          int rc = std::system(cmd.c_str());
          std::printf(rc == 0 ? "plot: %s\n" : "plot: failed (%s not written)\n", o.plot.c_str());
        }
      }
    }
  }
  return differ.empty() ? 0 : 3;
}

}  // namespace

// LibTorch allocates and frees every activation and gradient each step. With glibc's defaults the
// large ones go back to the kernel (munmap, heap trim) and fault in again, page by page, on the
// next step; on virtual machines where a page fault is expensive that tripled the CNN's
// forward+backward time. Keeping the freed memory in the heap makes later steps fault-free.
static void keepFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum: blocks below it come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // and the heap top is not handed back below 1 GiB
}

int main(int argc, char** argv) {
  keepFreedMemory();
  TrainOptions o;
  if (int rc = chorus::train::parseOptions(argc, argv, o); rc >= 0) return rc;
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-train: %s\n", e.what());
    return 1;
  }
}
