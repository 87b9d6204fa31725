// Where a rank learns its place in the job (include/chorus/launch.hpp): the variables of
// chorus-run, torchrun, mpirun (Open MPI, MPICH's Hydra) and srun.
#pragma once

#include <chorus/launch.hpp>

#include <optional>

namespace chorus {

// True when no launcher's rank variables and no CHORUS_STORE are set: the program was started on
// its own, and Communicator::fromEnv makes a world of one (as MPI does for a singleton).
bool launchedAlone();

// launchInfoFromEnv for a process that must be part of a launched job: throws when no launcher
// gave a rank, rather than answering "alone".
LaunchInfo readLaunchInfo();

// CHORUS_JOIN=1: an elastic launcher started this process as the replacement of a lost rank.
bool startedAsReplacement();

// CHORUS_JOIN_WAIT (seconds; chorus-run --spares sets 0): how long a newcomer waits to be
// admitted, where a launcher set it; nullopt when unset. 0 means as long as the job's store
// answers. Throws Error(kInvalidArgument) for a value that is not a number of seconds >= 0.
std::optional<double> joinWaitSeconds();

}  // namespace chorus
