// chorus-bench's command line: its own flags and the common flags of nccl-tests (-b -e -f -g -c
// -d -o -n -w -t -T), with nccl-tests' spellings of datatypes and reduction ops.
#pragma once

#include "bench.h"

#include <string>

namespace chorus::bench {

struct CommandLine {
  Config cfg;
  std::string algo;           // --algo, as CHORUS_ALGO
  std::string calibrateTo;    // --calibrate FILE
  double timeoutSeconds = 0;  // -T: the communicator's timeout; 0: CHORUS_TIMEOUT or the default
};

// Parses argv into `cl`. Returns -1 to go on, else the exit status after --help, --version or
// a usage error (printed).
int parseCommandLine(int argc, char** argv, CommandLine& cl);

}  // namespace chorus::bench
