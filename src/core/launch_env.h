// Where a rank learns its place in the job: CHORUS_* variables, or those of mpirun and srun.
#pragma once

#include <string>

namespace chorus {

struct LaunchEnv {
  int rank = -1;
  int size = -1;
  std::string store;   // CHORUS_STORE
  std::string source;  // which variables supplied rank and size, for messages
};

// Reads CHORUS_RANK/CHORUS_WORLD_SIZE, else OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE,
// SLURM_PROCID/SLURM_NTASKS. Throws Error(kInvalidArgument) naming what is missing or malformed.
LaunchEnv readLaunchEnv();

// True when no launcher variable and no CHORUS_STORE is set: the program was started on its own,
// and Communicator::fromEnv makes a world of one (as MPI does for a singleton).
bool launchedAlone();

}  // namespace chorus
