// The launchers' variables, in the order of precedence docs/config.md gives.
#include "core/launch_env.h"

#include "common/env_vars.h"
#include "core/slurm_env.h"

#include <chorus/error.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace chorus {
namespace {

enum class Kind { kChorus, kTorch, kOpenMpi, kHydra, kSlurm };

struct Launcher {
  Kind kind;
  const char* name;
  const char* rank;
  const char* size;
  const char* localRank;
  const char* localSize;  // nullptr: Slurm's, derived from its tasks-per-node list
};

constexpr Launcher kChorus{Kind::kChorus,       "chorus",
                           "CHORUS_RANK",       "CHORUS_WORLD_SIZE",
                           "CHORUS_LOCAL_RANK", "CHORUS_LOCAL_SIZE"};
constexpr Launcher kTorchrun{Kind::kTorch, "torchrun",   "RANK",
                             "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
constexpr Launcher kTorchEnv{Kind::kTorch, "RANK/WORLD_SIZE", "RANK",
                             "WORLD_SIZE", "LOCAL_RANK",      "LOCAL_WORLD_SIZE"};
constexpr Launcher kOpenMpi{Kind::kOpenMpi,
                            "Open MPI",
                            "OMPI_COMM_WORLD_RANK",
                            "OMPI_COMM_WORLD_SIZE",
                            "OMPI_COMM_WORLD_LOCAL_RANK",
                            "OMPI_COMM_WORLD_LOCAL_SIZE"};
constexpr Launcher kHydra{Kind::kHydra, "MPICH (Hydra)",   "PMI_RANK",
                          "PMI_SIZE",   "MPI_LOCALRANKID", "MPI_LOCALNRANKS"};
constexpr Launcher kSlurm{Kind::kSlurm,   "Slurm",         "SLURM_PROCID",
                          "SLURM_NTASKS", "SLURM_LOCALID", nullptr};

// torchrun's workers see the variables of whatever started torchrun (srun runs one torchrun per
// node, and SLURM_PROCID then numbers nodes, not workers): torchrun's own come first. Plain
// RANK / WORLD_SIZE count only beside MASTER_ADDR (torch's env:// convention), and last: the
// names are too common to trust alone.
std::vector<Launcher> launchersInOrder() {
  std::vector<Launcher> order{kChorus};
  if (envVar("TORCHELASTIC_RUN_ID")) order.push_back(kTorchrun);
  order.insert(order.end(), {kOpenMpi, kHydra, kSlurm});
  if (!envVar("TORCHELASTIC_RUN_ID") && envVar("MASTER_ADDR")) order.push_back(kTorchEnv);
  return order;
}

std::optional<Launcher> launcherInEnv() {
  for (const auto& l : launchersInOrder()) {
    if (envVar(l.rank) || envVar(l.size)) return l;
  }
  return std::nullopt;
}

// Slurm's tasks on this node: the step's list (srun inside sbatch runs a step smaller than the
// job), else the job's, at this node's index in the step.
int slurmLocalSize() {
  auto list = envVar("SLURM_STEP_TASKS_PER_NODE");
  if (!list) list = envVar("SLURM_TASKS_PER_NODE");
  if (!list) return -1;
  int node = 0;
  if (auto id = envVar("SLURM_NODEID")) {
    node = static_cast<int>(parseEnvNumber("SLURM_NODEID", *id, 0, 1 << 24));
  }
  return slurm::tasksOnNode(*list, node);
}

void readLocal(const Launcher& l, LaunchInfo& info) {
  // CHORUS_LOCAL_RANK / CHORUS_LOCAL_SIZE override any launcher's.
  auto rank = envVar("CHORUS_LOCAL_RANK");
  const char* rankName = "CHORUS_LOCAL_RANK";
  if (!rank) rank = envVar(rankName = l.localRank);
  auto size = envVar("CHORUS_LOCAL_SIZE");
  const char* sizeName = "CHORUS_LOCAL_SIZE";
  if (!size && l.localSize) size = envVar(sizeName = l.localSize);
  if (size) {
    info.localSize = static_cast<int>(parseEnvNumber(sizeName, *size, 1, info.size));
  } else if (!l.localSize && !envVar("CHORUS_LOCAL_SIZE")) {
    info.localSize = slurmLocalSize();
    if (info.localSize > info.size) info.localSize = -1;
  }
  if (rank) {
    const int limit = info.localSize > 0 ? info.localSize - 1 : info.size - 1;
    info.localRank = static_cast<int>(parseEnvNumber(rankName, *rank, 0, limit));
  }
}

// The store a launcher implies when CHORUS_STORE is not set; none (info.store stays "") when it
// implies none.
void deriveStore(const Launcher& l, LaunchInfo& info) {
  if (l.kind == Kind::kSlurm) {
    auto job = envVar("SLURM_JOB_ID");
    auto nodes = envVar("SLURM_STEP_NODELIST");
    if (!nodes) nodes = envVar("SLURM_JOB_NODELIST");
    if (!job || !nodes) return;
    auto jobId = static_cast<uint64_t>(parseEnvNumber("SLURM_JOB_ID", *job, 0, 1LL << 62));
    uint64_t stepId = 0;
    if (auto step = envVar("SLURM_STEP_ID")) {
      stepId = static_cast<uint64_t>(parseEnvNumber("SLURM_STEP_ID", *step, 0, 1LL << 62));
    }
    // Rank 0 runs on the step's first node; it hosts the store there.
    info.store =
        "tcp://" + slurm::firstHost(*nodes) + ":" + std::to_string(slurm::storePort(jobId, stepId));
    info.storeFrom = "Slurm job " + *job + " step " + std::to_string(stepId);
    return;
  }
  if (l.kind == Kind::kTorch) {
    auto addr = envVar("MASTER_ADDR");
    auto port = envVar("MASTER_PORT");
    if (!addr || !port) return;
    // torch's own store listens on MASTER_PORT; rank 0 hosts Chorus's on the next port.
    const long long p = parseEnvNumber("MASTER_PORT", *port, 1, 65534);
    info.store = "tcp://" + *addr + ":" + std::to_string(p + 1);
    info.storeFrom = "MASTER_ADDR, MASTER_PORT + 1";
  }
}

std::string missingStoreHint(const Launcher& l) {
  switch (l.kind) {
    case Kind::kOpenMpi:
      return "pass it to every rank: mpirun -x CHORUS_STORE=tcp://<host of rank 0>:29500 ...";
    case Kind::kHydra:
      return "pass it to every rank: mpiexec -genv CHORUS_STORE tcp://<host of rank 0>:29500 ...";
    case Kind::kSlurm:
      return "and SLURM_JOB_ID / SLURM_JOB_NODELIST, which would give one, are not set either";
    case Kind::kTorch:
      return "and MASTER_ADDR / MASTER_PORT, which would give one, are not set either";
    case Kind::kChorus:
      break;
  }
  return "for example tcp://<host of rank 0>:29500";
}

}  // namespace

bool startedAsReplacement() {
  auto joining = envVar("CHORUS_JOIN");
  return joining && *joining == "1";
}

std::optional<double> joinWaitSeconds() {
  const auto wait = envVar("CHORUS_JOIN_WAIT");
  if (!wait || wait->empty()) return std::nullopt;
  char* end = nullptr;
  const double seconds = std::strtod(wait->c_str(), &end);
  if (*end != '\0' || !(seconds >= 0)) {
    throw Error(
        ErrorCode::kInvalidArgument,
        "CHORUS_JOIN_WAIT must be a number of seconds >= 0 (0: no limit), got '" + *wait + "'");
  }
  return seconds;
}

bool launchedAlone() { return !launcherInEnv() && !envVar("CHORUS_STORE"); }

LaunchInfo readLaunchInfo() {
  const std::optional<Launcher> found = launcherInEnv();
  if (!found) {
    throw Error(ErrorCode::kInvalidArgument,
                "no rank in the environment: set CHORUS_RANK and CHORUS_WORLD_SIZE, or start the "
                "program with chorus-run, torchrun, mpirun or srun");
  }
  const Launcher l = *found;
  auto r = envVar(l.rank);
  auto n = envVar(l.size);
  if (!r || !n) {
    throw Error(
        ErrorCode::kInvalidArgument,
        std::string(r ? l.size : l.rank) + " is not set although " + (r ? l.rank : l.size) + " is");
  }
  LaunchInfo info;
  info.launcher = l.name;
  info.size = static_cast<int>(parseEnvNumber(l.size, *n, 1, 1 << 24));
  info.rank = static_cast<int>(parseEnvNumber(l.rank, *r, 0, info.size - 1));
  readLocal(l, info);
  if (auto store = envVar("CHORUS_STORE")) {
    info.store = *store;
    info.storeFrom = "CHORUS_STORE";
  } else {
    deriveStore(l, info);
  }
  if (info.store.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "CHORUS_STORE is not set (" + info.launcher +
                                                 " started this rank): " + missingStoreHint(l));
  }
  return info;
}

LaunchInfo launchInfoFromEnv() {
  if (launchedAlone()) {
    LaunchInfo alone;
    alone.localRank = 0;
    alone.localSize = 1;
    alone.launcher = "alone";
    return alone;
  }
  return readLaunchInfo();
}

}  // namespace chorus
