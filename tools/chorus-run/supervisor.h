// Watches the ranks: forwards the launcher's signals, reaps them, relays tagged output, and
// stops all of them (SIGTERM, then SIGKILL after a grace period) as soon as one fails.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "output_tagger.h"
#include "rank_process.h"

namespace chorus::launcher {

class Supervisor {
 public:
  // Blocks the signals the supervisor reads through a signalfd and ignores SIGPIPE. Must run
  // before any thread starts: a thread with them unblocked would take them with the default
  // action (SIGINT would kill the launcher before the ranks hear of it).
  static void setUpSignals();

  Supervisor(bool tagOutput, double graceSeconds);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  void add(const RankProcess& process);
  // Stops the ranks started so far (chorus-run could not start them all); run() then returns
  // exitCode unless a rank failed first.
  void abort(int exitCode);
  // Returns once every rank has been reaped; the value is chorus-run's exit status.
  int run();
  // run() calls tick about every period while ranks are alive (the hang watch).
  void setTick(std::chrono::milliseconds period, std::function<void()> tick);
  // Asked when ranks exit with an error (none killed by a signal): a line naming the rank at
  // fault, reported before the exits ("" for none).
  void setFailureExplainer(std::function<std::string()> explain) {
    explainFailure_ = std::move(explain);
  }
  // Sends sig to every live rank's process (not its group: the rank's own children may not
  // handle it).
  void signalAll(int sig);
  // The live process of rank (the latest started for it), or nullptr.
  const RankProcess* liveProcess(int rank) const;
  // Every process still running.
  std::vector<RankProcess> liveProcesses() const;
  // How many processes exited with status 0 so far.
  int succeeded() const { return succeeded_; }
  // Stops every rank as after a failure (SIGTERM, then SIGKILL after the grace period); run()
  // then returns exitCode unless a rank failed first (also when no rank is left to stop).
  void stopAll(int exitCode, const std::string& why);
  bool stopping() const { return stopping_; }

  // chorus-run --elastic: a rank that fails (exits non-zero or is killed by a signal) while the
  // job is not stopping is handed to handler, which decides what happens (restart it through
  // deferStart, let the job go on, or stopAll) instead of the job being stopped.
  void setFailureHandler(std::function<void(const RankProcess&, int waitStatus)> handler) {
    failureHandler_ = std::move(handler);
  }
  // Runs start (which may add() a rank) at the next turn of run()'s loop, where the ranks and
  // their streams may grow: the failure handler runs while they are being walked.
  void deferStart(std::function<void()> start) { deferred_.push_back(std::move(start)); }

 private:
  std::function<std::string()> explainFailure_;
  std::function<void(const RankProcess&, int)> failureHandler_;
  std::vector<std::function<void()>> deferred_;
  using Clock = std::chrono::steady_clock;
  struct Rank {
    RankProcess process;
    bool alive = true;
  };
  struct Stream {
    int rank;
    int fd;
    OutputTagger tagger;
  };

  void handleSignals();
  void reapChildren();
  void onRankExit(Rank& rank, int waitStatus);
  // Reaps ranks that end within `window`, adding the failed ones to `failed`.
  void collectExits(std::vector<std::pair<const Rank*, int>>& failed,
                    std::chrono::milliseconds window);
  void runDeferred();
  void onLauncherSignal(int sig);
  void beginStop(int sig);
  void killRemaining();
  // Relays up to maxReads reads of the stream; closes it at end of file.
  void drain(Stream& stream, int maxReads);
  void closeStream(Stream& stream);
  void setExitCode(int code);

  bool tagOutput_;
  Clock::duration grace_;
  int signalFd_ = -1;
  std::vector<Rank> ranks_;
  std::vector<Stream> streams_;
  int live_ = 0;
  int succeeded_ = 0;
  int exitCode_ = -1;  // -1: nothing has failed yet
  bool stopping_ = false;
  bool killed_ = false;
  int stopSignal_ = 0;
  Clock::time_point killAt_;
  std::chrono::milliseconds tickPeriod_{0};
  std::function<void()> tick_;
  Clock::time_point nextTick_;
};

}  // namespace chorus::launcher
