// Where a rank learns its place in the job (include/chorus/launch.hpp): the variables of
// chorus-run, torchrun, mpirun (Open MPI, MPICH's Hydra) and srun.
#pragma once

#include <chorus/launch.hpp>

namespace chorus {

// True when no launcher's rank variables and no CHORUS_STORE are set: the program was started on
// its own, and Communicator::fromEnv makes a world of one (as MPI does for a singleton).
bool launchedAlone();

// launchInfoFromEnv for a process that must be part of a launched job: throws when no launcher
// gave a rank, rather than answering "alone".
LaunchInfo readLaunchInfo();

// CHORUS_JOIN=1: an elastic launcher started this process as the replacement of a lost rank.
bool startedAsReplacement();

}  // namespace chorus
