#include "hang_watch.h"

#include <signal.h>
#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <sstream>
#include <system_error>

#include "diagnose.h"
#include "finding.h"
#include "options.h"
#include "output_tagger.h"
#include "trace.h"

namespace chorus::launcher {
namespace {

namespace fs = std::filesystem;

// How long the ranks get to write their dumps after SIGUSR1.
constexpr std::chrono::seconds kDumpWait{3};
// How often the progress records are read.
constexpr std::chrono::seconds kReadPeriod{1};

void say(const std::string& text) { writeAll(2, text); }

// Dumps of the communicator written since the signal.
int freshDumps(const std::string& dir, const std::string& communicator, int64_t sinceUs) {
  std::error_code ec;
  int count = 0;
  const std::string prefix = "chorus-trace-" + communicator + "-rank";
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || !name.ends_with(".json")) continue;
    auto written = fs::last_write_time(entry.path(), ec);
    if (ec) continue;
    auto system = std::chrono::file_clock::to_sys(written);
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(system.time_since_epoch());
    // Coarse file-system timestamps: allow a little slack.
    if (us.count() + 50000 >= sinceUs) ++count;
  }
  return count;
}

}  // namespace

std::string makeTraceDir() {
  if (const char* set = getenv("CHORUS_TRACE_DIR"); set && *set) {
    fs::create_directories(set);
    return set;
  }
  const char* tmp = getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/chorus-trace-XXXXXX";
  if (!mkdtemp(pattern.data())) {
    throw std::system_error(errno, std::generic_category(), "creating " + pattern);
  }
  return pattern;
}

HangWatch::HangWatch(std::string storeUrl, chorus::AuthOptions auth, double hangSeconds,
                     std::string traceDir, bool stopOnHang, Supervisor& supervisor)
    : storeUrl_(std::move(storeUrl)),
      auth_(std::move(auth)),
      hangSeconds_(hangSeconds),
      traceDir_(std::move(traceDir)),
      stopOnHang_(stopOnHang),
      supervisor_(supervisor),
      startedUs_(doctor::nowUs()),
      nextRead_(Clock::now()) {}

void HangWatch::tick() {
  if (supervisor_.stopping()) return;
  if (awaiting_) {
    awaitDumps();
    return;
  }
  if (Clock::now() < nextRead_) return;
  nextRead_ = Clock::now() + kReadPeriod;
  try {
    readRecords();
  } catch (const std::exception&) {
    // The store is not up yet or went away: the watch tries again at the next period.
    store_.reset();
  }
}

void HangWatch::readRecords() {
  if (!store_) store_ = openStore(storeUrl_, std::chrono::seconds(1), auth_);
  auto records = doctor::readProgress(*store_, std::chrono::seconds(1));
  const int64_t now = doctor::nowUs();
  for (const auto& c : records.communicators) {
    int64_t latest = 0;
    bool pending = false;
    int64_t lowestCompleted = INT64_MAX;
    for (const auto& p : c.records) {
      latest = std::max(latest, p.lastProgressUs);
      lowestCompleted = std::min(lowestCompleted, p.completed);
      pending = pending || p.state != "idle" || p.issued > p.completed;
    }
    for (const auto& p : c.records) pending = pending || p.completed != lowestCompleted;
    // A communicator none of whose records was published since the launch belongs to an
    // earlier job that used the same store.
    bool ours = false;
    for (const auto& p : c.records) ours = ours || p.publishedUs >= startedUs_;
    if (!pending || latest == 0 || !ours) continue;
    if (c.id == hungCommunicator_ && latest <= hungAtProgressUs_) continue;  // already reported
    const double quiet = static_cast<double>(now - latest) / 1e6;
    if (quiet < hangSeconds_) continue;
    hungCommunicator_ = c.id;
    hungSize_ = c.size;
    hungAtProgressUs_ = latest;
    std::string call = "collective #" + std::to_string(lowestCompleted);
    for (const auto& p : c.records) {
      if (p.hasCurrent && p.currentNumber == lowestCompleted) {
        call = p.currentCollective + " #" + std::to_string(lowestCompleted);
      }
    }
    hungSummary_ = "no rank made progress for " + doctor::seconds(quiet) + " in " + call +
                   " of communicator " + c.id;
    say("chorus-run: " + hungSummary_ + "; asking every rank to dump its trace (SIGUSR1) to " +
        traceDir_ + "\n");
    signalledUs_ = now;
    supervisor_.signalAll(SIGUSR1);
    awaiting_ = true;
    dumpDeadline_ = Clock::now() + kDumpWait;
    return;  // one hang at a time
  }
}

void HangWatch::awaitDumps() {
  if (freshDumps(traceDir_, hungCommunicator_, signalledUs_) < hungSize_ &&
      Clock::now() < dumpDeadline_) {
    return;
  }
  awaiting_ = false;
  printVerdict();
  if (stopOnHang_) {
    supervisor_.stopAll(kHangExit, "--hang-action stop");
  } else {
    say("chorus-run: the job keeps running (--hang-action report)\n");
  }
}

void HangWatch::printVerdict() {
  std::ostringstream out;
  auto loaded = doctor::loadDumps(traceDir_);
  std::vector<doctor::Dump> ours;
  for (auto& d : loaded.dumps) {
    if (d.communicator == hungCommunicator_) ours.push_back(std::move(d));
  }
  if (!ours.empty()) {
    doctor::printText(out, doctor::diagnoseDumps(ours), loaded.problems);
    if (static_cast<int>(ours.size()) < hungSize_) {
      out << "(" << ours.size() << " of " << hungSize_ << " ranks dumped within "
          << kDumpWait.count() << " s)\n";
    }
  } else {
    // No dump came: the verdict from the progress records instead.
    out << "(no dump arrived within " << kDumpWait.count()
        << " s; the verdict below comes from the progress records)\n";
    try {
      if (!store_) store_ = openStore(storeUrl_, std::chrono::seconds(1), auth_);
      auto records = doctor::readProgress(*store_, std::chrono::seconds(1));
      std::vector<doctor::LiveRecords::Communicator> hung;
      for (auto& c : records.communicators) {
        if (c.id == hungCommunicator_) hung.push_back(std::move(c));
      }
      records.communicators = std::move(hung);
      if (!records.communicators.empty()) {
        doctor::printText(out, doctor::diagnoseLive(records, doctor::nowUs(), {}),
                          records.problems);
      }
    } catch (const std::exception& e) {
      out << "(cannot read the progress records: " << e.what() << ")\n";
    }
  }
  say(out.str());
}

}  // namespace chorus::launcher
