// The TCP connections of a world: each rank dials the lower ranks and accepts the higher ones;
// every connection starts with a hello carrying the job id and both ranks.
#pragma once

#include "common/deadline.h"
#include "common/fd.h"
#include "transport/job_id.h"

#include <string>
#include <vector>

namespace chorus::transport::tcp {

// A connected socket to one peer, hello exchanged.
struct Connection {
  int peer = -1;
  Fd fd;
  std::string address;
  std::string host;  // the peer's machine id: same string = same machine (filled by the caller)
};

// Connects to lower rank `peer`, listening at `address`, and exchanges hellos.
Connection dialLower(const std::string& address, int rank, int size, int peer, const JobId& job,
                     int bufferBytes, Deadline deadline);

// Accepts connections until every higher rank has said hello. Strays (garbage, another job,
// a duplicate rank) are closed without disturbing the others.
std::vector<Connection> acceptHigher(int listener, int rank, int size, const JobId& job,
                                     Deadline deadline);

}  // namespace chorus::transport::tcp
