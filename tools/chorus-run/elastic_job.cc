#include "elastic_job.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <map>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "common/errno_text.h"
#include "output_tagger.h"

namespace chorus::launcher {
namespace {

constexpr std::chrono::seconds kStoreTimeout{2};
// A replacement that fails sooner than this after its start is reported as failing again.
constexpr int64_t kQuickFailureMs = 10000;

void report(const std::string& message) {
  writeAll(STDERR_FILENO, "chorus-run: " + message + "\n");
}

std::string ranksWord(int n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); }

// Slots past the launcher's ranks are its spares' (startSpares), named so.
std::string describeFailure(const RankProcess& process, int waitStatus,
                            const ElasticSettings& settings) {
  const int spare = process.rank - settings.firstRank - settings.ranks;
  const std::string who =
      spare >= 0 ? "spare " + std::to_string(spare + 1) : "rank " + std::to_string(process.rank);
  return who + " (pid " + std::to_string(process.pid) + ") " + describeExit(waitStatus);
}

}  // namespace

ElasticJob::ElasticJob(ElasticSettings settings, Supervisor& supervisor, Starter start)
    : settings_(std::move(settings)),
      supervisor_(supervisor),
      start_(std::move(start)),
      restartsOfRank_(static_cast<size_t>(settings_.ranks + settings_.spares), 0) {
  if (settings_.worldSize < settings_.ranks) settings_.worldSize = settings_.ranks;
  currentSize_ = settings_.worldSize;
  // create() ranks the job's communicator as the launchers do (CHORUS_RANK).
  for (int rank = 0; rank < settings_.worldSize; ++rank) memberSlots_.push_back(rank);
  if (settings_.spares > 0) {
    // The spares waiting are the replacements: the survivors need not wait for a restart to
    // register (no restarts_left published), and admit no more than the job's size.
    publishMaxSize();
  } else {
    publishRestartsLeft();
  }
}

std::vector<std::string> ElasticJob::joinerEnv(int restartOfSlot) const {
  std::vector<std::string> env = {"CHORUS_JOIN=1",
                                  "CHORUS_RESTART=" + std::to_string(restartOfSlot)};
  // With spares a joiner may wait long for a hole (the job is full until a rank is lost).
  if (settings_.spares > 0) env.push_back("CHORUS_JOIN_WAIT=0");
  return env;
}

void ElasticJob::startSpares() {
  for (int k = 0; k < settings_.spares; ++k) {
    const int slot = settings_.firstRank + settings_.ranks + k;
    auto env = joinerEnv(0);
    env.push_back("CHORUS_SPARE=1");
    RankProcess spare = start_(slot, env);
    supervisor_.add(spare);
    pending_.push_back({slot, spare.pid});
    replacements_.push_back(spare.pid);
    report("spare " + std::to_string(k + 1) + " of " + std::to_string(settings_.spares) +
           " started as pid " + std::to_string(spare.pid) +
           " (CHORUS_JOIN=1 CHORUS_SPARE=1): it takes the place of the next rank lost");
  }
}

void ElasticJob::publishMaxSize() {
  Store* s = store();
  if (!s) return;
  const std::string size = std::to_string(settings_.worldSize);
  try {
    // The C++ communicator meets at the root, the torch backend's default group under "torch/".
    for (const std::string prefix : {"", "torch/"}) {
      s->set(prefix + elastic_keys::kMaxSizeKey, Store::Bytes(size.begin(), size.end()));
    }
  } catch (const std::exception& e) {
    store_.reset();
    report(std::string("cannot publish ") + elastic_keys::kMaxSizeKey + " (" + e.what() +
           "); the spares may be admitted beside the ranks");
  }
}

void ElasticJob::onFailure(const RankProcess& process, int waitStatus) {
  const std::string failure = describeFailure(process, waitStatus, settings_);
  // A replacement failing soon after its start is likely to fail the same way every time: say
  // so, so that a crash loop using up the restarts shows in the log.
  if (const auto started = replacementStarted_.find(process.pid);
      started != replacementStarted_.end()) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - started->second)
                        .count();
    replacementStarted_.erase(started);
    if (ms < kQuickFailureMs) {
      report("rank " + std::to_string(process.rank) + " failed again " + std::to_string(ms) +
             " ms after its restart (a crash loop? " +
             std::to_string(settings_.maxRestarts - restartsUsed_) + " restart(s) left)");
    }
  }
  // A replacement that ends before it was admitted will never be.
  const size_t pendingBefore = pending_.size();
  const bool wasPending =
      std::erase_if(pending_, [&process](const Pending& p) { return p.pid == process.pid; }) > 0;
  // (With spares nothing was announced.)
  if (settings_.spares == 0 &&
      std::find(replacements_.begin(), replacements_.end(), process.pid) != replacements_.end()) {
    withdrawIfUnregistered(process);
  }
  const int exitCode = WIFEXITED(waitStatus) ? WEXITSTATUS(waitStatus) : 128 + WTERMSIG(waitStatus);
  // More joiners waited than the job had holes: this one was a spare, not a rank of the job.
  const bool spareLost = settings_.spares > 0 && wasPending &&
                         static_cast<int>(pendingBefore) > settings_.worldSize - currentSize_;
  if (spareLost && restartsUsed_ >= settings_.maxRestarts) {
    report("a spare (pid " + std::to_string(process.pid) + ") " + describeExit(waitStatus) +
           " while it waited to join; not restarted (no restarts left)");
    return;
  }
  if (restartsUsed_ < settings_.maxRestarts) {
    ++restartsUsed_;
    // First of all: the survivors' shrink, under way already, waits only for the joiners
    // announced by the time it decides, so the replacement is admitted at the membership change
    // that follows the failure only when this comes first.
    if (settings_.spares == 0) {
      announceJoiner(process.rank, 1);
      publishRestartsLeft();
    }
    report(failure + "; restarting it (restart " + std::to_string(restartsUsed_) + " of " +
           std::to_string(settings_.maxRestarts) + ")");
    const int rank = process.rank;
    supervisor_.deferStart([this, rank, failure, exitCode] {
      try {
        restart(rank);
      } catch (const std::exception& e) {
        report("cannot restart rank " + std::to_string(rank) + ": " + e.what());
        // No joiner will come: the survivors must not wait for one.
        if (settings_.spares == 0) announceJoiner(rank, -1);
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
  const int restartOfRank = ++restartsOfRank_.at(static_cast<size_t>(rank - settings_.firstRank));
  RankProcess replacement = start_(rank, joinerEnv(restartOfRank));
  supervisor_.add(replacement);
  pending_.push_back({rank, replacement.pid});
  replacements_.push_back(replacement.pid);
  replacementStarted_[replacement.pid] = std::chrono::steady_clock::now();
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

void ElasticJob::publishRestartsLeft() {
  Store* s = store();
  if (!s) return;
  const std::string left = std::to_string(settings_.maxRestarts - restartsUsed_);
  try {
    s->set(kRestartsLeftKey, Store::Bytes(left.begin(), left.end()));
  } catch (const std::exception& e) {
    store_.reset();
    report(std::string("cannot publish ") + kRestartsLeftKey + " (" + e.what() +
           "); a replacement may join only at a later membership change");
  }
}

void ElasticJob::lose(const std::string& failure, int exitCode) {
  lost_.push_back(failure);
  if (firstLostExitCode_ < 0) firstLostExitCode_ = exitCode;
  // Who is left: the processes still running (ranks, and the spares and replacements that take
  // lost ranks' places: a spare admitted for a lost rank keeps the job at its size) and the ranks
  // that finished well, at most this launcher's ranks.
  const int remaining =
      std::min(settings_.ranks,
               static_cast<int>(supervisor_.liveProcesses().size()) + supervisor_.succeeded());
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

void ElasticJob::withdrawIfUnregistered(const RankProcess& process) {
  Store* s = store();
  if (!s) return;
  try {
    if (joinerTicket(process.pid).number >= 0) return;  // registered: a decision admits it, or did
  } catch (const std::exception&) {
    store_.reset();
    return;
  }
  report("the replacement of rank " + std::to_string(process.rank) + " (pid " +
         std::to_string(process.pid) +
         ") ended before it registered as a joiner; taking back its "
         "announcement in " +
         kExpectedJoinersKey);
  announceJoiner(process.rank, -1);
}

ElasticJob::Ticket ElasticJob::joinerTicket(pid_t pid) {
  Store* s = store();
  if (!s) throw std::runtime_error("no store");
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string record = std::string(host) + " pid " + std::to_string(pid);
  // A C++ job's communicator meets at the root of this store; the torch backend's default group
  // under "torch/" (python/ext/torch/process_group_shrink.cc, kJobStorePrefix).
  for (const std::string prefix : {"", "torch/"}) {
    const int64_t issued = s->add(prefix + elastic_keys::kJoinerTicketsKey, 0);
    for (int64_t t = issued; t >= 1; --t) {  // the newest first: replacements are recent
      const std::string key = prefix + elastic_keys::joinerKey(t);
      if (!s->check({key})) continue;
      const auto value = s->get(key, kStoreTimeout);
      if (std::string(value.begin(), value.end()) == record) return {t, prefix};
    }
  }
  return {-1, ""};
}

bool ElasticJob::admitted(pid_t pid) {
  const Ticket t = joinerTicket(pid);
  return t.number >= 0 && store()->check({t.prefix + elastic_keys::admittedKey(t.number)});
}

void ElasticJob::tick() {
  pollChange();
  stopUnadmittedReplacements();
}

void ElasticJob::stopUnadmittedReplacements() {
  if (supervisor_.stopping() || supervisor_.succeeded() == 0) return;
  const auto live = supervisor_.liveProcesses();
  if (live.empty()) return;
  std::string names;
  for (const auto& p : live) {
    if (std::find(replacements_.begin(), replacements_.end(), p.pid) == replacements_.end()) {
      return;  // an original rank still runs
    }
    try {
      if (admitted(p.pid)) return;
    } catch (const std::exception&) {
      store_.reset();
      return;  // cannot tell: leave it running
    }
    names += (names.empty() ? "" : ", ") +
             ("rank " + std::to_string(p.rank) + " (pid " + std::to_string(p.pid) + ")");
  }
  supervisor_.stopAll(0, "every other rank finished (exit 0) before the replacement(s) " + names +
                             " were admitted; the job is done");
}

void ElasticJob::pollChange() {
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
    followChange(value);
  } catch (const std::exception&) {
    store_.reset();  // reconnect at the next tick
  }
}

void ElasticJob::followChange(const std::string& change) {
  if (memberSlots_.empty()) return;
  std::map<std::string, std::string> fields;
  std::istringstream words(change);
  for (std::string word; words >> word;) {
    const auto eq = word.find('=');
    if (eq != std::string::npos) fields[word.substr(0, eq)] = word.substr(eq + 1);
  }
  auto numbers = [&fields](const std::string& name) {
    std::vector<int> out;
    std::istringstream in(fields[name]);
    for (std::string item; std::getline(in, item, ',');) {
      if (!item.empty()) out.push_back(std::stoi(item));
    }
    return out;
  };
  std::vector<int> former, lost;
  uint64_t generation = 0;
  try {
    generation = std::stoull(fields.at("generation"));
    currentSize_ = std::stoi(fields.at("size"));
    former = numbers("former");
    lost = numbers("lost");
  } catch (const std::exception&) {
    memberSlots_.clear();  // not a line this launcher understands: stop following
    return;
  }
  if (generation != generation_ + 1) {
    memberSlots_.clear();  // a change went unseen (two within one poll): the mapping is lost
    return;
  }
  generation_ = generation;
  std::vector<int> slots;
  const auto newcomers = static_cast<size_t>(std::count(former.begin(), former.end(), -1));
  // With spares, the newcomers are told by their tickets (a decision admits them in ticket
  // order, after the survivors). Without, one newcomer is the oldest replacement started;
  // several at once come in an order this launcher cannot tell (the order they registered in).
  std::vector<size_t> admittedHereIdx;
  if (settings_.spares > 0 && newcomers > 0) {
    try {
      admittedHereIdx = admittedPending();
    } catch (const std::exception&) {
      store_.reset();  // cannot tell: the newcomers stay unknown (nobody killed for them)
    }
  }
  const bool newcomersByTicket = settings_.spares > 0 && admittedHereIdx.size() == newcomers;
  const bool newcomerKnown =
      settings_.spares == 0 && newcomers == 1 && !pending_.empty() && oldestPendingAdmitted();
  size_t nextNewcomer = 0;
  for (int old : former) {
    if (old >= 0 && old < static_cast<int>(memberSlots_.size())) {
      slots.push_back(memberSlots_[static_cast<size_t>(old)]);
    } else if (newcomersByTicket) {
      slots.push_back(pending_[admittedHereIdx[nextNewcomer++]].slot);
    } else {
      slots.push_back(newcomerKnown ? pending_.front().slot : -1);
    }
  }
  for (int old : lost) {
    if (old < 0 || old >= static_cast<int>(memberSlots_.size())) continue;
    const int slot = memberSlots_[static_cast<size_t>(old)];
    // A slot with a replacement on its way (or admitted now) lost a process that already ended.
    const bool replacing = std::any_of(pending_.begin(), pending_.end(),
                                       [slot](const Pending& p) { return p.slot == slot; });
    if (slot < 0 || replacing || std::count(slots.begin(), slots.end(), slot) > 0) {
      continue;
    }
    if (const RankProcess* p = supervisor_.liveProcess(slot)) {
      report("rank " + std::to_string(slot) + " (pid " + std::to_string(p->pid) +
             ") was declared dead by the survivors (generation " + std::to_string(generation) +
             ") but is still running; killing it (SIGKILL)");
      signalRank(*p, SIGKILL);
    }
  }
  if (settings_.spares > 0) {
    // The admitted ones leave the queue (from the back: the indexes stay valid).
    std::sort(admittedHereIdx.rbegin(), admittedHereIdx.rend());
    for (size_t i : admittedHereIdx)
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    memberSlots_ = std::move(slots);
    return;
  }
  // With one launcher per host, a newcomer that is not known to be ours is another host's.
  const size_t admittedHere = settings_.worldSize == settings_.ranks || newcomerKnown
                                  ? std::min(newcomers, pending_.size())
                                  : 0;
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(admittedHere));
  memberSlots_ = std::move(slots);
}

std::vector<size_t> ElasticJob::admittedPending() {
  std::vector<std::pair<int64_t, size_t>> byTicket;
  for (size_t i = 0; i < pending_.size(); ++i) {
    const Ticket t = joinerTicket(pending_[i].pid);
    if (t.number >= 0 && store()->check({t.prefix + elastic_keys::admittedKey(t.number)})) {
      byTicket.emplace_back(t.number, i);
    }
  }
  std::sort(byTicket.begin(), byTicket.end());
  std::vector<size_t> out;
  for (const auto& [ticket, i] : byTicket) out.push_back(i);
  return out;
}

bool ElasticJob::oldestPendingAdmitted() {
  if (settings_.worldSize == settings_.ranks) return true;
  try {
    return admitted(pending_.front().pid);
  } catch (const std::exception&) {
    store_.reset();
    return false;  // cannot tell: treat the newcomer as unknown (nobody killed for it)
  }
}

Store* ElasticJob::store() {
  if (store_) return store_.get();
  try {
    store_ = openStore(settings_.storeUrl, kStoreTimeout, settings_.auth);
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
                                           const chorus::AuthOptions& auth,
                                           const LaunchEnvironment& launchEnv,
                                           Supervisor& supervisor) {
  ElasticSettings settings{
      options.ranks, options.maxRestarts, options.minRanks, options.spares, storeUrl,
      auth,          options.firstRank,   options.worldSize};
  auto start = [&options, &launchEnv](int rank, const std::vector<std::string>& extraEnv) {
    // A spare's slot is past this launcher's ranks: it has the last rank's environment until
    // it is admitted and takes the rank it is given there.
    const int lastRank = options.firstRank + options.ranks - 1;
    auto overrides = rankEnvironment(launchEnv, std::min(rank, lastRank));
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
