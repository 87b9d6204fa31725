// chorus-run --elastic: a rank that fails no longer stops the job. While restarts remain, the
// launcher announces a joiner in the store (chorus/elastic/expected_joiners) and starts a
// replacement with CHORUS_JOIN=1; with none left, the job goes on while enough ranks remain.
// It also logs each membership change the ranks publish (chorus/elastic/last_change), and kills
// a rank the survivors declared dead that still runs. With spares, processes wait, started and
// ready, to take a lost rank's place at once (the job capped at its size). The keys are those of
// docs/fault-tolerance.md.
#pragma once

#include <chorus/store.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/elastic_keys.h"
#include "options.h"
#include "rank_environment.h"
#include "rank_process.h"
#include "supervisor.h"

namespace chorus::launcher {

using elastic_keys::kExpectedJoinersKey;
using elastic_keys::kLastChangeKey;
using elastic_keys::kRestartsLeftKey;

struct ElasticSettings {
  int ranks = 0;        // of this launcher: job ranks firstRank .. firstRank + ranks - 1
  int maxRestarts = 3;  // over all ranks
  int minRanks = 1;
  int spares = 0;  // processes started to wait, ready, for a lost rank's place
  std::string storeUrl;
  chorus::AuthOptions auth;  // the key the launcher's store client proves
  int firstRank = 0;
  int worldSize = 0;  // of the whole job; larger than ranks with one launcher per host
};

class ElasticJob {
 public:
  // Starts a process for rank with these extra "NAME=value" variables; throws when it cannot
  // (std::system_error, or std::runtime_error when the program cannot be executed).
  using Starter = std::function<RankProcess(int rank, const std::vector<std::string>& extraEnv)>;

  ElasticJob(ElasticSettings settings, Supervisor& supervisor, Starter start);
  // The supervisor's failure handler: restart the rank, let the job go on, or stop it.
  void onFailure(const RankProcess& process, int waitStatus);
  // Called by the supervisor about every Supervisor tick: logs a new membership change.
  void tick();
  // Starts the spares (--spares), after the ranks: slots past this launcher's ranks, the last
  // rank's environment plus CHORUS_JOIN=1 and CHORUS_SPARE=1. Throws as Starter does.
  void startSpares();

 private:
  // Logs a new value of chorus/elastic/last_change and follows it.
  void pollChange();
  // When every rank but replacements not admitted has finished well (exit 0), nobody is left to
  // admit them: stops them and lets the job end with status 0.
  void stopUnadmittedReplacements();
  // The joiner ticket that the replacement with this pid registered under (the library's
  // chorus/elastic/joiner/<t> names host and pid; under "torch/" for the torch backend's default
  // group), number -1 when it did not register. Throws when the store cannot be read.
  struct Ticket {
    int64_t number = -1;
    std::string prefix;  // where its group's elastic keys live in this store
  };
  Ticket joinerTicket(pid_t pid);
  // Whether a decision admitted the replacement with this pid. Throws as joinerTicket.
  bool admitted(pid_t pid);
  // A replacement ended: if it never registered as a joiner, takes its announcement back from
  // chorus/elastic/expected_joiners (else every later shrink() would wait for it).
  void withdrawIfUnregistered(const RankProcess& process);
  // Adds delta to chorus/elastic/expected_joiners: 1 before the replacement of rank starts, -1
  // when it could not start after all.
  void announceJoiner(int rank, int delta);
  // Sets chorus/elastic/restarts_left: while it is above 0, the survivors' shrink() gives this
  // launcher a moment to announce the replacement of a rank they lost (they see the death at the
  // same moment). Published at the start and after each announcement, never before one.
  void publishRestartsLeft();
  void restart(int rank);
  // Extra variables of every joiner this launcher starts (spares and restarts).
  std::vector<std::string> joinerEnv(int restartOfSlot) const;
  // With spares: writes the cap on the job's members (chorus/elastic/max_size) where the C++
  // communicator and the torch backend's default group meet.
  void publishMaxSize();
  // With spares: the pending processes a decision admitted (newest tickets checked), in ticket
  // order; throws when the store cannot be read.
  std::vector<size_t> admittedPending();
  // A rank that will not come back: the job goes on while at least minRanks remain.
  void lose(const std::string& failure, int exitCode);
  // The store, opened on first use; null (and the error reported once) when unreachable.
  Store* store();
  // Follows the job communicator's members through a membership change ("generation=G ...
  // former=... lost=..."), and kills a lost member still running: the survivors declared it dead
  // (it hung, or was too slow), so it could hold the job open forever (a stopped process).
  void followChange(const std::string& change);
  // Whether the oldest pending replacement is the one newcomer of a change. With one launcher,
  // it is; with one per host, the newcomer may be another launcher's: true only when its joiner
  // record is marked admitted.
  bool oldestPendingAdmitted();

  // The launcher rank (slot) of each rank of the job's communicator; -1 where unknown (several
  // newcomers at once). Empty once a change was missed: then nobody is killed.
  std::vector<int> memberSlots_;
  uint64_t generation_ = 0;
  // Replacements started and not yet admitted (nor ended), oldest first.
  struct Pending {
    int slot;
    pid_t pid;
  };
  std::vector<Pending> pending_;
  std::vector<pid_t> replacements_;  // every replacement started
  std::map<pid_t, std::chrono::steady_clock::time_point> replacementStarted_;

  ElasticSettings settings_;
  Supervisor& supervisor_;
  Starter start_;
  std::shared_ptr<Store> store_;
  bool storeErrorReported_ = false;
  int restartsUsed_ = 0;
  std::vector<int> restartsOfRank_;
  std::vector<std::string> lost_;  // "rank 2 (pid N) was killed by signal 9 (Killed)"
  int firstLostExitCode_ = -1;
  std::string lastChange_;
  int currentSize_ = 0;  // members of the job's communicator at the last change seen
};

// The elastic job of a launch: a replacement gets its rank's environment from launchEnv (which
// must outlive the job) plus CHORUS_JOIN=1 and CHORUS_RESTART=<n>.
std::unique_ptr<ElasticJob> makeElasticJob(const Options& options, const std::string& storeUrl,
                                           const chorus::AuthOptions& auth,
                                           const LaunchEnvironment& launchEnv,
                                           Supervisor& supervisor);

}  // namespace chorus::launcher
