// The end of chorus-train's run (training.h): the drifting replicas averaged, the check that all
// ranks hold the same parameters, and rank 0's summary and metrics file.
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "model.h"
#include "training.h"

namespace chorus::train {

// Local-sgd and diloco replicas drift apart between syncs (sync and delayed must not): end on
// their average, and evaluate that model.
void Training::averageDriftingReplicas() {
  if (o_.mode != "local-sgd" && o_.mode != "diloco") return;
  const bool averaged = replica_->averageParameters();
  double acc = 0;
  replica_->replica().collective(
      [&](chorus::Communicator& c) { acc = evaluate(model_, test_, c); });
  if (replica_->communicator().rank() == 0 && averaged) {
    std::printf(
        "%s: parameters averaged once more at the end (test accuracy %.2f%% before, "
        "%.2f%% after)\n",
        o_.mode.c_str(), 100.0 * accuracy_[0], 100.0 * acc);
  } else if (replica_->communicator().rank() == 0) {
    std::printf("%s: replicas identical at the end (a sync was the last step): nothing averaged\n",
                o_.mode.c_str());
  }
  accuracy_[0] = static_cast<float>(acc);
}

std::vector<int> Training::ranksDifferingFromRoot() {
  for (;;) {
    try {
      return replica_->ranksDifferingFromRoot();
    } catch (const chorus::dp::MembershipChanged&) {  // check again among the new membership
    }
  }
}

void Training::printSummary(const std::vector<int>& differ, double total) {
  auto& comm = replica_->communicator();
  const int ranks = comm.size();
  if (comm.rank() != 0) return;
  std::printf("gradients reported by autograd hooks: %zu of %zu (rest taken as final at wait)\n",
              hookReports_, expectedReports_);
  std::printf("final test accuracy %.2f%%, %.1f s in total (%.1f s training, %.1f s evaluating)\n",
              100.0 * accuracy_[0], total, total - evalSeconds_, evalSeconds_);
  uint64_t sent = 0, reduced = 0;
  for (const auto& r : rows_) sent += r.m.bytesSent, reduced += r.m.bytesReduced;
  const double stepsDone = static_cast<double>(std::max<size_t>(rows_.size(), 1));
  std::printf(
      "bytes sent per rank per step: %.0f (rank 0, mean over %zu steps; %.0f bytes of "
      "gradients and parameters reduced), %.1f MB in all\n",
      static_cast<double>(sent) / stepsDone, rows_.size(), static_cast<double>(reduced) / stepsDone,
      static_cast<double>(sent) / 1e6);
  if (o_.targetAccuracy > 0 && !targetReachedAt_) {
    std::printf("target accuracy %.2f%% not reached\n", 100.0 * o_.targetAccuracy);
  }
  if (differ.empty()) {
    std::printf("parameters identical on all %d ranks (hash %016" PRIx64 ")\n", ranks,
                replica_->parameterHash());
  } else {
    std::string list;
    for (int r : differ) list += (list.empty() ? "" : ", ") + std::to_string(r);
    std::printf("parameters DIFFER: rank(s) %s differ from rank 0 (of %d ranks)\n", list.c_str(),
                ranks);
  }
  // Who reached the all-reduces last, as rank 0 saw it: a rank that is last in most calls by
  // more than a millisecond is slow before the call (compute, input), not in the network.
  const chorus::StragglerReport stragglers = comm.stragglerReport();
  std::fputs(stragglers.summary().c_str(), stdout);
  for (const auto& r : stragglers.ranks) {
    if (r.lastFraction >= 0.5 && r.lagSamples > 0 && r.medianLagMs >= 1.0) {
      std::printf(
          "rank %d reaches the all-reduces late in most steps: its compute or input is slower, "
          "not the network\n",
          r.rank);
    }
  }
  double waitSum = 0, transferSum = 0;
  for (const auto& r : rows_) {
    waitSum += r.m.waitForSlowestSeconds, transferSum += r.m.transferSeconds;
  }
  std::printf(
      "all-reduce time over %zu steps (rank 0): %.3f s waiting for the slowest rank, %.3f s "
      "moving bytes\n",
      rows_.size(), waitSum, transferSum);
  std::fflush(stdout);
  writeMetrics();
}

// --metrics and --plot (rank 0).
void Training::writeMetrics() const {
  if (o_.metrics.empty() && o_.plot.empty()) return;
  const std::string csv = o_.metrics.empty() ? o_.plot + ".csv" : o_.metrics;
  writeCsv(csv, rows_);
  std::printf("metrics: %s (%zu steps)\n", csv.c_str(), rows_.size());
  if (o_.plot.empty()) return;
  if (access("/usr/bin/python3", X_OK) != 0) {
    std::printf("plot: skipped, /usr/bin/python3 not found\n");
    return;
  }
  const std::string cmd = std::string("/usr/bin/python3 '") + CHORUS_TRAIN_PLOT_SCRIPT + "' '" +
                          csv + "' '" + o_.plot + "'";
  const int rc = std::system(cmd.c_str());
  std::printf(rc == 0 ? "plot: %s\n" : "plot: failed (%s not written)\n", o_.plot.c_str());
}

}  // namespace chorus::train
