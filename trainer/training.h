// One rank's training run of chorus-train: set-up (data, model, replica, optimizer, resume), the
// loop of steps and epochs with its membership changes, and the report at the end.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "checkpoint.h"
#include "data.h"
#include "metrics_file.h"
#include "optimizer_state.h"
#include "options.h"
#include "torch_replica.h"

namespace chorus::train {

class Training {
 public:
  explicit Training(const TrainOptions& o);

  // Trains to the end; 0, or 3 when the replicas' parameters differ at the end.
  int run();

 private:
  using Clock = std::chrono::steady_clock;
  // The trainer's progress: identical on every rank (registered with the Replica, so a
  // membership change copies it with the parameters) and written to checkpoints.
  // kEvaluatedAt: the step after which the last evaluation outside an epoch's end ran.
  enum Field : size_t { kEpoch, kPos, kStartRanks, kEvaluatedAt, kFields };

  chorus::dp::Options replicaOptions();
  void registerState();
  std::vector<CheckpointEntry> checkpointEntries();
  void resumeFromCheckpoint();
  void printStart() const;

  // The loop: each returns after one step, one epoch's end, or the end of training.
  bool reachedTheEnd();
  void startEpochStatistics();
  void endEpoch();
  void trainStep();
  void evaluatePeriodically(double wall);
  void afterStep(size_t pos);
  void reportMembershipChange(const chorus::dp::MembershipChange& c) const;
  double evaluateTimed(chorus::Communicator& c);
  double scaledLr(int ranks) const;

  // After the loop (training_report.cc).
  void averageDriftingReplicas();
  std::vector<int> ranksDifferingFromRoot();
  void printSummary(const std::vector<int>& differ, double total);
  void writeMetrics() const;

  const TrainOptions& o_;
  int threads_ = 1;
  Dataset train_, test_;
  bool newcomer_ = false;  // a replacement for a lost rank (joined a running job)
  bool failHere_ = false;  // --fail-rank names this rank, in its first life
  bool resumeHere_ = false;
  torch::nn::Sequential model_;
  int64_t position_[kFields] = {1, 0, 0, -1};
  float accuracy_[1] = {-1};
  TrainOptimizer* optimPtr_ = nullptr;  // set once optim_ exists (the replica's hook uses it)
  std::unique_ptr<chorus::torch_dp::TorchReplica> replica_;
  std::unique_ptr<TrainOptimizer> optim_;
  int64_t stepOnDisk_ = 0;
  std::vector<CheckpointEntry> entries_;

  std::vector<Row> rows_;
  size_t hookReports_ = 0, expectedReports_ = 0;
  Clock::time_point start_;
  double evalSeconds_ = 0;                 // spent evaluating: left out of the training time
  std::optional<double> targetReachedAt_;  // training seconds when --target-accuracy was reached
  std::vector<size_t> order_;
  int64_t orderEpoch_ = -1;
  // This rank's statistics of the current epoch (rank 0 prints them).
  int64_t statsEpoch_ = -1;
  double epochLoss_ = 0;
  size_t epochBatches_ = 0;
  Clock::time_point epochStart_;
  std::unique_ptr<Progress> progress_;
  // Set when a membership change happened: the first step completed afterwards is reported.
  std::optional<chorus::dp::MembershipChange> pendingChange_;
};

}  // namespace chorus::train
