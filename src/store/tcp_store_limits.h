// What the TCP store server accepts from its clients, so that no client can make it use
// unbounded memory or descriptors, or hold a connection without speaking.
#pragma once

#include <chrono>
#include <cstddef>

namespace chorus::store {

struct ServerLimits {
  size_t maxKeyBytes = 4096;                    // CHORUS_STORE_MAX_KEY
  size_t maxValueBytes = 64u << 20;             // CHORUS_STORE_MAX_VALUE (at most the 64 MiB body)
  size_t maxConnections = 1024;                 // CHORUS_STORE_MAX_CONNECTIONS
  std::chrono::milliseconds frameTime{60'000};  // CHORUS_STORE_FRAME_TIMEOUT (seconds)

  // The defaults above, overridden by the variables; a bad value throws Error(kInvalidArgument)
  // naming the variable.
  static ServerLimits fromEnv();
};

// Address of the other end of a connected socket as "ip:port" ("[ip6]:port"); "?" when unknown.
std::string peerAddressOf(int fd);

}  // namespace chorus::store
