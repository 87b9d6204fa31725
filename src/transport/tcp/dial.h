// The TCP connections of a world: each rank dials the lower ranks and accepts the higher ones;
// every connection starts with the authentication handshake when the job has a key
// (auth/handshake_messages.h; the context is "rank" + the job id), then a hello carrying the job
// id and both ranks.
#pragma once

#include "auth/job_key.h"
#include "common/deadline.h"
#include "common/fd.h"
#include "transport/job_id.h"
#include "transport/tcp/sealed_stream.h"
#include "transport/tcp/zero_copy.h"

#include <memory>

#include <string>
#include <vector>

namespace chorus::transport::tcp {

// A connected socket to one peer, hello exchanged.
struct Connection {
  int peer = -1;
  Fd fd;
  std::string address;
  std::string host;  // the peer's machine id: same string = same machine (filled by the caller)
  std::unique_ptr<SealedStream> sealed;  // the connection's encryption, when on
  ZeroCopySettings zeroCopy;             // the link's MSG_ZEROCOPY sends (filled by the caller)
};

// Connects to lower rank `peer`, listening at `address`, authenticates with `key` (none: no
// handshake) and exchanges hellos. A refused key throws Error(kInvalidArgument) saying so.
// `encrypt` (needs a key): the connection's keys are derived from the handshake and both sides
// must encrypt; the hellos tell, and a mismatch throws Error(kInvalidArgument) naming it.
Connection dialLower(const std::string& address, int rank, int size, int peer, const JobId& job,
                     const auth::JobKey* key, bool encrypt, int bufferBytes, bool zeroCopy,
                     Deadline deadline);

// Accepts connections until every higher rank has authenticated (with `key`, when set) and said
// hello. Strays (no key, a wrong key, garbage, another job, a duplicate rank, a connection that
// takes longer than `handshakeTime`) are closed without disturbing the others; those that
// fail authentication are logged once per address. A peer that authenticated but disagrees on
// `encrypt` makes it throw Error(kInvalidArgument) naming the setting (its reply tells the peer).
std::vector<Connection> acceptHigher(int listener, int rank, int size, const JobId& job,
                                     const auth::JobKey* key, bool encrypt,
                                     std::chrono::milliseconds handshakeTime, Deadline deadline);

}  // namespace chorus::transport::tcp
