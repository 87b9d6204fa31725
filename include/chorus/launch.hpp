// Where this process sits in its job, as the launcher that started it says: usable before any
// communicator exists (to pick a core or a device by local rank, to print where a run went).
#pragma once

#include <chorus/export.h>

#include <string>

namespace chorus {

struct LaunchInfo {
  int rank = 0;
  int size = 1;
  // Index among the ranks of this host and their number; -1 when the launcher does not say.
  int localRank = -1;
  int localSize = -1;
  std::string store;      // the store URL the ranks meet at ("" for a process started alone)
  std::string launcher;   // "chorus", "torchrun", "Open MPI", "MPICH (Hydra)", "Slurm", "alone"
  std::string storeFrom;  // what gave the store: "CHORUS_STORE", "Slurm job", "MASTER_ADDR/PORT"
};

// Reads the launch variables (docs/config.md, "Launch variables", has the order of precedence):
// CHORUS_RANK / CHORUS_WORLD_SIZE / CHORUS_STORE, else torchrun's, Open MPI's, Hydra's or
// Slurm's. Under Slurm and torchrun the store address is derived from the job when CHORUS_STORE
// is not set. A process started with none of them is a world of one ("alone"). Throws
// Error(kInvalidArgument) naming the variable that is missing or malformed.
CHORUS_API LaunchInfo launchInfoFromEnv();

}  // namespace chorus
