#include "elastic_job.h"

#include <sys/wait.h>
#include <unistd.h>

#include <exception>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "common/errno_text.h"
#include "output_tagger.h"

namespace chorus::launcher {
namespace {

constexpr std::chrono::seconds kStoreTimeout{2};

void report(const std::string& message) {
  writeAll(STDERR_FILENO, "chorus-run: " + message + "\n");
}

std::string ranksWord(int n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); }

std::string describeFailure(const RankProcess& process, int waitStatus) {
  return "rank " + std::to_string(process.rank) + " (pid " + std::to_string(process.pid) + ") " +
         describeExit(waitStatus);
}

}  // namespace

ElasticJob::ElasticJob(ElasticSettings settings, Supervisor& supervisor, Starter start)
    : settings_(std::move(settings)),
      supervisor_(supervisor),
      start_(std::move(start)),
      restartsOfRank_(static_cast<size_t>(settings_.ranks), 0) {}

void ElasticJob::onFailure(const RankProcess& process, int waitStatus) {
  const std::string failure = describeFailure(process, waitStatus);
  const int exitCode = WIFEXITED(waitStatus) ? WEXITSTATUS(waitStatus) : 128 + WTERMSIG(waitStatus);
  if (restartsUsed_ < settings_.maxRestarts) {
    ++restartsUsed_;
    // First of all: the survivors' shrink, under way already, waits only for the joiners
    // announced by the time it decides, so the replacement is admitted at the membership change
    // that follows the failure only when this comes first.
    announceJoiner(process.rank, 1);
    report(failure + "; restarting it (restart " + std::to_string(restartsUsed_) + " of " +
           std::to_string(settings_.maxRestarts) + ")");
    const int rank = process.rank;
    supervisor_.deferStart([this, rank, failure, exitCode] {
      try {
        restart(rank);
      } catch (const std::exception& e) {
        report("cannot restart rank " + std::to_string(rank) + ": " + e.what());
        announceJoiner(rank, -1);  // no joiner will come: the survivors must not wait for one
        lose(failure, exitCode);
      }
    });
    return;
  }
  report(failure +
         (settings_.maxRestarts == 0
              ? " (no restarts: --max-restarts 0)"
              : "; no restarts left (all " + std::to_string(settings_.maxRestarts) + " used)"));
  lose(failure, exitCode);
}

void ElasticJob::restart(int rank) {
  const int restartOfRank = ++restartsOfRank_.at(static_cast<size_t>(rank));
  RankProcess replacement =
      start_(rank, {"CHORUS_JOIN=1", "CHORUS_RESTART=" + std::to_string(restartOfRank)});
  supervisor_.add(replacement);
  report("rank " + std::to_string(rank) + " restarted as pid " + std::to_string(replacement.pid) +
         " (CHORUS_JOIN=1 CHORUS_RESTART=" + std::to_string(restartOfRank) + "); " +
         std::to_string(settings_.maxRestarts - restartsUsed_) + " restart(s) left");
}

void ElasticJob::announceJoiner(int rank, int delta) {
  Store* s = store();
  if (!s) return;
  try {
    s->add(kExpectedJoinersKey, delta);
  } catch (const std::exception& e) {
    store_.reset();
    report("cannot announce the replacement of rank " + std::to_string(rank) + " in " +
           kExpectedJoinersKey + " (" + e.what() +
           "); it may join only at a later membership change");
  }
}

void ElasticJob::lose(const std::string& failure, int exitCode) {
  lost_.push_back(failure);
  if (firstLostExitCode_ < 0) firstLostExitCode_ = exitCode;
  // Ranks that already finished successfully are not lost: they count as remaining.
  const int remaining = settings_.ranks - static_cast<int>(lost_.size());
  if (remaining >= settings_.minRanks) {
    report("the job continues with " + std::to_string(remaining) + " of " +
           ranksWord(settings_.ranks) + " (--min-ranks " + std::to_string(settings_.minRanks) +
           ")");
    return;
  }
  std::string failures;
  for (const auto& f : lost_) failures += (failures.empty() ? "" : "; ") + f;
  supervisor_.stopAll(firstLostExitCode_,
                      "only " + std::to_string(remaining) + " of " + ranksWord(settings_.ranks) +
                          " left, fewer than --min-ranks " + std::to_string(settings_.minRanks) +
                          "; failures: " + failures);
}

void ElasticJob::tick() {
  Store* s = store();
  if (!s) return;
  try {
    if (!s->check({kLastChangeKey})) return;
    auto bytes = s->get(kLastChangeKey, std::chrono::seconds(1));
    std::string value(bytes.begin(), bytes.end());
    while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) value.pop_back();
    if (value == lastChange_) return;
    lastChange_ = value;
    report("membership: " + value);
  } catch (const std::exception&) {
    store_.reset();  // reconnect at the next tick
  }
}

Store* ElasticJob::store() {
  if (store_) return store_.get();
  try {
    store_ = openStore(settings_.storeUrl, kStoreTimeout);
    storeErrorReported_ = false;
  } catch (const std::exception& e) {
    if (!storeErrorReported_) {
      report("cannot reach the store " + settings_.storeUrl + " (" + e.what() + "); trying again");
      storeErrorReported_ = true;
    }
  }
  return store_.get();
}

std::unique_ptr<ElasticJob> makeElasticJob(const Options& options, const std::string& storeUrl,
                                           const LaunchEnvironment& launchEnv,
                                           Supervisor& supervisor) {
  ElasticSettings settings{options.ranks, options.maxRestarts, options.minRanks, storeUrl};
  auto start = [&options, &launchEnv](int rank, const std::vector<std::string>& extraEnv) {
    auto overrides = rankEnvironment(launchEnv, rank);
    overrides.insert(overrides.end(), extraEnv.begin(), extraEnv.end());
    int execErrno = 0;
    RankProcess process =
        spawnRank(rank, options.command, buildEnvironment(overrides), options.tagOutput, execErrno);
    if (execErrno != 0) {
      // The child exits 127, reaped but not supervised: the restart itself failed.
      for (int fd : {process.outFd, process.errFd}) {
        if (fd >= 0) close(fd);
      }
      throw std::runtime_error("cannot execute '" + options.command[0] +
                               "': " + chorus::errnoText(execErrno));
    }
    return process;
  };
  return std::make_unique<ElasticJob>(std::move(settings), supervisor, std::move(start));
}

}  // namespace chorus::launcher
