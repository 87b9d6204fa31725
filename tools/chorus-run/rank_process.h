// Starting one rank: fork + execvp in its own process group, with its environment prepared.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace chorus::launcher {

struct RankProcess {
  int rank = 0;
  pid_t pid = -1;  // also the rank's process group id
  // Read ends of the rank's stdout/stderr pipes when output is tagged, else -1.
  int outFd = -1;
  int errFd = -1;
};

// The launcher's environment with each "NAME=value" of overrides replacing NAME.
std::vector<std::string> buildEnvironment(const std::vector<std::string>& overrides);

// Starts command with env. When pipeOutput, the rank's stdout/stderr go to new pipes whose
// (non-blocking) read ends are returned in the result. Throws std::system_error when the
// process cannot be created; when exec fails, sets execErrno to its errno (the child then
// exits 127 and must still be reaped).
RankProcess spawnRank(int rank, const std::vector<std::string>& command,
                      const std::vector<std::string>& env, bool pipeOutput, int& execErrno);

// Sends sig to the rank's process group, so that processes it started get it too.
void signalRank(const RankProcess& process, int sig);

// "exited with status 3" or "was killed by signal 9 (Killed)", from a waitpid status.
std::string describeExit(int waitStatus);

}  // namespace chorus::launcher
