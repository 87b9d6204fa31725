// chorus-run: starts N local ranks of a Chorus program and supervises them (see options.cc for
// the command line and the exit status).
#include <chorus/store.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <system_error>

#include "auth/launcher_key.h"
#include "common/errno_text.h"
#include "elastic_job.h"
#include "failure_verdict.h"
#include "hang_watch.h"
#include "options.h"
#include "rank_environment.h"
#include "rank_process.h"
#include "supervisor.h"

using namespace chorus::launcher;

namespace {

int launch(const Options& options) {
  // The hosted store lives until every rank has exited.
  std::unique_ptr<chorus::TcpStoreServer> server;
  std::string storeUrl = options.store;
  // A store of its own gets a fresh key for this job, unless the user gave one or turned
  // authentication off: the store takes it as an argument, this process's own clients too, and
  // the ranks find it in CHORUS_AUTH_KEY_FILE of their environment. The key file goes away with
  // the launcher.
  std::unique_ptr<chorus::auth::LauncherKey> jobKey;
  chorus::AuthOptions auth = chorus::AuthOptions::fromEnv();
  if (storeUrl.empty() && auth.keyFile.empty() && auth.mode != chorus::AuthMode::kOff) {
    jobKey = std::make_unique<chorus::auth::LauncherKey>();
    auth.keyFile = jobKey->path();
  }
  if (storeUrl.empty()) {
    server = std::make_unique<chorus::TcpStoreServer>("127.0.0.1", 0, auth,
                                                      chorus::StoreLimits::fromEnv());
    storeUrl = "tcp://127.0.0.1:" + std::to_string(server->port());
  }

  LaunchEnvironment launchEnv{
      options.ranks,     storeUrl,         options.timeoutSeconds, pickFreeLoopbackPort(), {}, {},
      options.firstRank, options.worldSize};
  if (jobKey) launchEnv.keyFile = jobKey->path();
  launchEnv.spares = options.spares;
  Supervisor supervisor(options.tagOutput, options.graceSeconds);
  std::unique_ptr<HangWatch> hangWatch;
  if (options.hangSeconds) {
    launchEnv.traceDir = makeTraceDir();
    writeAll(2, "chorus-run: the ranks' traces go to " + launchEnv.traceDir + "\n");
    hangWatch = std::make_unique<HangWatch>(storeUrl, auth, *options.hangSeconds,
                                            launchEnv.traceDir, options.stopOnHang, supervisor);
  }
  std::unique_ptr<ElasticJob> elastic;
  if (options.elastic) {
    elastic = makeElasticJob(options, storeUrl, auth, launchEnv, supervisor);
    supervisor.setFailureHandler(
        [&elastic](const RankProcess& p, int status) { elastic->onFailure(p, status); });
  }
  if (hangWatch || elastic) {
    supervisor.setTick(HangWatch::kTickPeriod, [&hangWatch, &elastic] {
      if (hangWatch) hangWatch->tick();
      if (elastic) elastic->tick();
    });
  }
  const int64_t launchedUs = std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  supervisor.setFailureExplainer(
      [storeUrl, auth, launchedUs] { return verdictFromProgress(storeUrl, auth, launchedUs); });
  for (int rank = options.firstRank; rank < options.firstRank + options.ranks; ++rank) {
    auto overrides = rankEnvironment(launchEnv, rank);
    int execErrno = 0;
    try {
      supervisor.add(spawnRank(rank, options.command, buildEnvironment(overrides),
                               options.tagOutput, execErrno));
    } catch (const std::system_error& e) {
      writeAll(2, "chorus-run: cannot start rank " + std::to_string(rank) + ": " + e.what() + "\n");
      supervisor.abort(1);
      break;
    }
    if (execErrno != 0) {
      // Every rank runs the same program: no point starting the others. The failed child exits
      // 127, which the supervisor reports and returns.
      writeAll(2, "chorus-run: cannot execute '" + options.command[0] +
                      "': " + chorus::errnoText(execErrno) + "\n");
      if (elastic) supervisor.abort(127);  // not a failure to restart from
      break;
    }
  }
  if (elastic && !supervisor.stopping()) {
    try {
      elastic->startSpares();
    } catch (const std::exception& e) {
      writeAll(2, std::string("chorus-run: cannot start the spares: ") + e.what() + "\n");
      supervisor.abort(1);
    }
  }
  const int status = supervisor.run();
  if (elastic) elastic->tick();  // a membership change published just before the end
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  int exitCode = 0;
  auto options = parseOptions(argc, argv, exitCode);
  if (!options) return exitCode;
  try {
    Supervisor::setUpSignals();  // before the store server starts its thread
    return launch(*options);
  } catch (const std::exception& e) {
    writeAll(2, std::string("chorus-run: ") + e.what() + "\n");
    return 1;
  }
}
