#include "options.h"

#include <CLI/CLI.hpp>

#include "common/tool_version.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <iostream>

namespace chorus::launcher {
namespace {

constexpr const char* kUsage = "Usage: chorus-run -n N [OPTIONS] -- PROGRAM [ARGS...]";

constexpr const char* kFooter = R"(
Everything after "--" is the program and its arguments; the program alone may also be given
without "--" when it takes no options.

Each rank gets CHORUS_RANK, CHORUS_WORLD_SIZE, CHORUS_LOCAL_RANK, CHORUS_LOCAL_SIZE,
CHORUS_STORE and, with --timeout, CHORUS_TIMEOUT; also what torch.distributed's env:// init
reads: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and MASTER_PORT
(a free loopback port). SIGINT, SIGTERM and SIGHUP are forwarded to every rank. When a rank
fails (without --elastic), the others get SIGTERM, then SIGKILL after the grace period.

Exit status: 0 when every rank exited 0; otherwise that of the first rank that failed (its exit
status, or 128+N when signal N killed it; 127 when the program cannot be executed); 128+N when
chorus-run itself received signal N; 2 for a usage error; 1 when chorus-run cannot start the
ranks; 124 when --hang-action stop stopped a job that made no progress. With --elastic: 0 when
every rank still running at the end exits 0 (the ranks lost on the way are excused and named in
the log); otherwise that of the first rank lost for good, or as above.

With --hang-seconds S, the ranks also get CHORUS_TRACE_DIR (a new directory, printed; or the
one already set in the environment) and CHORUS_TRACE_SIGNAL=USR1. chorus-run reads their
progress records from the store every second; when no rank made progress for S seconds while a
call is pending, it sends SIGUSR1 to every rank, waits briefly for their dumps and prints
chorus-doctor's verdict.

With --elastic, a rank that exits non-zero or is killed does not stop the job. While restarts
remain (--max-restarts in all, over all ranks), chorus-run adds 1 to the store key
chorus/elastic/expected_joiners and starts a replacement with the rank's environment plus
CHORUS_JOIN=1 and CHORUS_RESTART=<how many times this rank was restarted>: the program must
handle the loss (Communicator::shrink) and the replacement must join (Communicator::fromEnv
joins when CHORUS_JOIN=1). With no restarts left, the job goes on while at least --min-ranks
ranks remain (ranks that finished successfully count), else chorus-run stops every rank and
names the failures. A rank that exits 0 is done and is not restarted. chorus-run logs every
failure, restart and membership change (the ranks' chorus/elastic/last_change), and kills a rank
the survivors declared dead that still runs (stuck or stopped), which then counts as failed.
With --spares K, K more processes start beside the ranks with the environment of the last rank
plus CHORUS_JOIN=1, CHORUS_SPARE=1 and CHORUS_JOIN_WAIT=0: each does its start-up and waits to
be admitted, and the job never has more than its ranks (chorus-run writes the cap to
chorus/elastic/max_size), so a spare takes a lost rank's place at the survivors' membership
change, without the replacement's start-up; the process started for a lost rank (a restart)
becomes the next spare. The store is
the one chorus-run hosts, or the one --store names (which chorus-run must reach too). See
docs/elastic-launch.md.)";

// Usage errors get the error and the one-line usage, not the whole help.
std::nullopt_t usageError(const std::string& message, int& exitCode) {
  std::cerr << "chorus-run: " << message << "\n"
            << kUsage << "\nRun 'chorus-run --help' for more information.\n";
  exitCode = kUsageExit;
  return std::nullopt;
}

}  // namespace

std::optional<Options> parseOptions(int argc, char** argv, int& exitCode) {
  // Split at the first "--" ourselves so that CLI11 never sees the program's own options.
  int split = 1;
  while (split < argc && std::strcmp(argv[split], "--") != 0) ++split;

  Options options;
  std::vector<std::string> positional;
  CLI::App app{"Starts N local Chorus ranks and supervises them.", "chorus-run"};
  app.footer(std::string("\n") + kUsage + "\n" + kFooter);
  app.set_version_flag("--version", chorus::tools::versionText("chorus-run"));
  app.add_option("-n,--ranks", options.ranks, "Number of ranks to start")
      ->required()
      ->check(CLI::Range(1, 65536));
  app.add_option("--first-rank", options.firstRank,
                 "With one launcher per host: the job rank of this launcher's first rank "
                 "(default 0; needs --world-size)")
      ->check(CLI::Range(0, 65535));
  auto* worldSize = app.add_option("--world-size", options.worldSize,
                                   "With one launcher per host: ranks in the whole job (default "
                                   "-n); needs --store, a store every host reaches")
                        ->check(CLI::Range(1, 65536));
  app.add_option("--store", options.store,
                 "Store URL for the ranks (tcp://host:port or file:///dir); default: a TCP "
                 "store hosted by chorus-run");
  app.add_flag("--tag-output", options.tagOutput, "Prefix each output line with [rank]");
  app.add_option("--timeout", options.timeoutSeconds,
                 "Set CHORUS_TIMEOUT (seconds, fractions too: 2.5) in the ranks' environment")
      ->check(CLI::Range(0.001, 1e7));
  app.add_option("--grace", options.graceSeconds,
                 "Seconds between SIGTERM and SIGKILL when stopping ranks (default 5)")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--hang-seconds", options.hangSeconds,
                 "When no rank made progress for S seconds, dump every rank's trace and print "
                 "the doctor's verdict")
      ->check(CLI::Range(0.5, 1e6));
  std::string hangAction = "report";
  app.add_option("--hang-action", hangAction,
                 "After the verdict: report (keep running, the default) or stop the job")
      ->check(CLI::IsMember({"report", "stop"}));
  app.add_flag("--elastic", options.elastic,
               "Keep the job running when a rank fails: restart it, or go on without it");
  auto* maxRestarts =
      app.add_option("--max-restarts", options.maxRestarts,
                     "With --elastic: replacements started in all, over all ranks (default 3)")
          ->check(CLI::Range(0, 1000000));
  auto* minRanks = app.add_option("--min-ranks", options.minRanks,
                                  "With --elastic: the job goes on while at least M ranks "
                                  "remain (default 1)")
                       ->check(CLI::Range(1, 65536));
  auto* spares = app.add_option("--spares", options.spares,
                                "With --elastic: K more processes wait, ready, to take a lost "
                                "rank's place (default 0)")
                     ->check(CLI::Range(0, 1024));
  app.add_option("program", positional, "Program and arguments (or give them after --)");

  try {
    app.parse(split, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    exitCode = 0;
    return std::nullopt;
  } catch (const CLI::CallForVersion& v) {
    std::cout << v.what() << "\n";
    exitCode = 0;
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    return usageError(e.what(), exitCode);
  }

  options.stopOnHang = hangAction == "stop";
  if (options.stopOnHang && !options.hangSeconds) {
    return usageError("--hang-action needs --hang-seconds", exitCode);
  }
  for (auto* elasticOnly : {maxRestarts, minRanks, spares}) {
    if (elasticOnly->count() > 0 && !options.elastic) {
      return usageError(elasticOnly->get_name() + " needs --elastic", exitCode);
    }
  }
  if (options.minRanks > options.ranks) {
    return usageError("--min-ranks " + std::to_string(options.minRanks) + " is larger than -n " +
                          std::to_string(options.ranks),
                      exitCode);
  }
  if (worldSize->count() == 0) {
    if (options.firstRank != 0) return usageError("--first-rank needs --world-size", exitCode);
    options.worldSize = options.ranks;
  }
  if (options.firstRank + options.ranks > options.worldSize) {
    return usageError("ranks " + std::to_string(options.firstRank) + ".." +
                          std::to_string(options.firstRank + options.ranks - 1) +
                          " do not fit in --world-size " + std::to_string(options.worldSize),
                      exitCode);
  }
  if (options.worldSize != options.ranks && options.store.empty()) {
    // A store hosted here listens on loopback: the other hosts' ranks could not reach it.
    return usageError("--world-size larger than -n needs --store", exitCode);
  }
  std::vector<std::string> afterDashes(argv + std::min(split + 1, argc), argv + argc);
  if (!positional.empty() && !afterDashes.empty()) {
    return usageError("the program must come either before or after \"--\", not both", exitCode);
  }
  options.command = positional.empty() ? std::move(afterDashes) : std::move(positional);
  if (options.command.empty()) {
    return usageError("no program given", exitCode);
  }
  return options;
}

}  // namespace chorus::launcher
