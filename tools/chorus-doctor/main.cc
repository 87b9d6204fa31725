// chorus-doctor: names the rank and the call that hold up a Chorus job, from the flight
// recorder's dumps (chorus-doctor DIR) or from the progress records of a running job
// (chorus-doctor --live --store URL). See docs/doctor.md.
#include <CLI/CLI.hpp>

#include <chorus/store.hpp>

#include <stdlib.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <thread>

#include "diagnose.h"
#include "finding.h"
#include "timeline.h"
#include "trace.h"

#include "common/tool_version.h"

namespace {

using namespace chorus::doctor;

constexpr int kNoProblem = 0;
constexpr int kProblem = 1;
constexpr int kCannotRead = 2;

constexpr const char* kFooter = R"(
Prints a line that begins with "verdict:", then the evidence per communicator.
Exit status: 0 when no problem was found, 1 when one was, 2 for a usage error or when nothing
could be read.)";

int print(const std::vector<Finding>& findings, const std::vector<std::string>& problems,
          bool json) {
  if (json) {
    std::cout << toJson(findings, problems).dump(2) << "\n";
  } else {
    printText(std::cout, findings, problems);
  }
  std::cout.flush();
  return mostSevere(findings).kind == "healthy" ? kNoProblem : kProblem;
}

int fromDumps(const std::string& dir, bool json, const std::string& timelinePath) {
  LoadedDumps loaded = loadDumps(dir);
  if (!timelinePath.empty()) {
    std::ofstream out(timelinePath);
    out << chromeTrace(loaded.dumps).dump() << "\n";
    if (!out) {
      std::cerr << "chorus-doctor: cannot write " << timelinePath << "\n";
      return kCannotRead;
    }
    std::cerr << "chorus-doctor: wrote the timeline of " << loaded.dumps.size() << " dumps to "
              << timelinePath << "\n";
  }
  if (loaded.dumps.empty()) {
    std::cerr << "chorus-doctor: no chorus-trace-*.json dump could be read in " << dir << "\n";
    for (const auto& p : loaded.problems) std::cerr << "  " << p << "\n";
    return kCannotRead;
  }
  return print(diagnoseDumps(loaded.dumps), loaded.problems, json);
}

int live(const std::string& url, const chorus::AuthOptions& auth, bool json, double watchSeconds,
         const LiveOptions& options) {
  auto store = chorus::openStore(url, std::chrono::seconds(5), auth);
  while (true) {
    LiveRecords records = readProgress(*store, std::chrono::seconds(2));
    int status;
    if (records.communicators.empty()) {
      std::cout << "verdict: no progress records in " << url
                << " (no communicator of two or more ranks registered yet, or its ranks publish "
                   "none: CHORUS_PROGRESS_SECONDS=0)\n";
      std::cout.flush();
      status = kCannotRead;
    } else {
      status = print(diagnoseLive(records, nowUs(), options), records.problems, json);
    }
    if (watchSeconds <= 0) return status;
    std::this_thread::sleep_for(std::chrono::duration<double>(watchSeconds));
    std::cout << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Names the rank and the call that hold up a Chorus job.", "chorus-doctor"};
  app.footer(kFooter);
  app.set_version_flag("--version", chorus::tools::versionText("chorus-doctor"));
  std::string dir, url, timeline;
  bool json = false, isLive = false;
  double watch = 0;
  LiveOptions options;
  app.add_option("dir", dir, "Directory with the ranks' chorus-trace-*.json dumps");
  app.add_flag("--json", json, "Print the verdict and the evidence as JSON");
  app.add_option(
      "--timeline", timeline,
      "Also write the dumps as a Chrome trace (Perfetto, chrome://tracing) to this file");
  app.add_flag("--live", isLive,
               "Diagnose a running job from its progress records (needs --store)");
  app.add_option("--store", url, "The job's store (tcp://host:port or file:///dir), with --live");
  std::string keyFile;
  app.add_option("--key-file", keyFile,
                 "With --live: the job's key file, when its store authenticates clients "
                 "(default: $CHORUS_AUTH_KEY_FILE)");
  app.add_option("--watch", watch, "With --live: diagnose again every S seconds until interrupted")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--stale-seconds", options.staleSeconds,
                 "With --live: a record older than this means its rank stopped publishing "
                 "(default 5)")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--quiet-seconds", options.quietSeconds,
                 "With --live: report a pending call only after this long without progress "
                 "(default 2)")
      ->check(CLI::Range(0.0, 1e6));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kCannotRead;
  }
  try {
    if (isLive) {
      if (url.empty() || !dir.empty() || !timeline.empty()) {
        std::cerr << "chorus-doctor: --live takes --store URL and no directory or --timeline\n";
        return kCannotRead;
      }
      // The store client proves the key of the environment's settings, or of --key-file.
      chorus::AuthOptions auth = chorus::AuthOptions::fromEnv();
      if (!keyFile.empty()) auth.keyFile = keyFile;
      return live(url, auth, json, watch, options);
    }
    if (dir.empty() || !url.empty() || watch > 0) {
      std::cerr << "chorus-doctor: give a directory of dumps, or --live --store URL\n"
                << "Run 'chorus-doctor --help' for more information.\n";
      return kCannotRead;
    }
    return fromDumps(dir, json, timeline);
  } catch (const std::exception& e) {
    std::cerr << "chorus-doctor: " << e.what() << "\n";
    return kCannotRead;
  }
}
