// Command line of chorus-run.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace chorus::launcher {

struct Options {
  int ranks = 0;
  // One launcher per host (--first-rank, --world-size): this launcher's ranks are firstRank ..
  // firstRank + ranks - 1 of a job of worldSize ranks (worldSize 0: ranks, all of them here).
  int firstRank = 0;
  int worldSize = 0;
  // Store URL passed to the ranks; empty: chorus-run hosts a TCP store on 127.0.0.1.
  std::string store;
  // Prefix every line a rank prints with "[rank] ".
  bool tagOutput = false;
  // CHORUS_TIMEOUT for the ranks, in seconds; unset: the ranks' own default.
  std::optional<double> timeoutSeconds;
  // How long ranks get between SIGTERM (or a forwarded signal) and SIGKILL.
  double graceSeconds = 5.0;
  // --hang-seconds: when no rank made progress for this long while a call is pending, the
  // ranks dump their traces and the doctor's verdict is printed; unset: no watch.
  std::optional<double> hangSeconds;
  // --hang-action stop: also stop the job after the verdict (else it keeps running).
  bool stopOnHang = false;
  // --elastic: a failed rank is restarted (up to maxRestarts times over all ranks) or, with no
  // restarts left, the job goes on while at least minRanks ranks remain (elastic_job.h).
  bool elastic = false;
  int maxRestarts = 3;
  int minRanks = 1;
  // --spares: processes started beside the ranks with CHORUS_JOIN=1, each waiting (imports and
  // set-up done) to take a lost rank's place at the survivors' next membership change.
  int spares = 0;
  // Program and its arguments.
  std::vector<std::string> command;
};

// Exit status of chorus-run for a command line it rejects.
inline constexpr int kUsageExit = 2;
// Exit status when --hang-action stop stopped a job that made no progress (as timeout(1)).
inline constexpr int kHangExit = 124;

// Parses argv. On --help or a usage error, prints the message and returns nullopt with
// exitCode set (0 for --help, kUsageExit for an error).
std::optional<Options> parseOptions(int argc, char** argv, int& exitCode);

}  // namespace chorus::launcher
