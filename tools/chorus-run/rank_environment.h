// The variables chorus-run gives each rank: Chorus's own (CHORUS_*) and those torch.distributed's
// env:// init method reads, so that a torch script runs under chorus-run as under torchrun.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace chorus::launcher {

struct LaunchEnvironment {
  int ranks = 0;                         // ranks of this launcher (CHORUS_LOCAL_SIZE)
  std::string storeUrl;                  // CHORUS_STORE
  std::optional<double> timeoutSeconds;  // CHORUS_TIMEOUT when set
  int masterPort = 0;                    // MASTER_PORT, on MASTER_ADDR 127.0.0.1
  std::string traceDir;                  // CHORUS_TRACE_DIR and CHORUS_TRACE_SIGNAL=USR1 when set
  std::string keyFile;                   // CHORUS_AUTH_KEY_FILE when set: the job's key
  int firstRank = 0;                     // job rank of this launcher's first rank
  int worldSize = 0;                     // CHORUS_WORLD_SIZE; 0: ranks
  int spares = 0;                        // CHORUS_SPARES when above 0 (--spares)
};

// "NAME=value" overrides for one rank of the launch; rank is the job rank (CHORUS_RANK), its
// local rank is rank - firstRank.
std::vector<std::string> rankEnvironment(const LaunchEnvironment& launch, int rank);

// A loopback TCP port that was free a moment ago (the kernel's pick for port 0). Rank 0's
// torch store binds it; the short window in between is the same one torchrun leaves.
int pickFreeLoopbackPort();

}  // namespace chorus::launcher
