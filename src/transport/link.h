// One peer's connection as the transport drives it: a TCP stream or shared-memory rings. The
// transport owns one data link per peer and calls it once per message (no call per byte).
#pragma once

#include "transport/data_path.h"

#include <string>

namespace chorus::transport {

class Link {
 public:
  virtual ~Link() = default;

  // "tcp" or "shm".
  virtual const char* kind() const = 0;
  // r is started (Request::start) and queued behind the link's earlier requests.
  virtual void postSend(Request& r) = 0;
  virtual void postRecv(Request& r) = 0;
  // Whether r is a send this link still holds (for messages about a stalled wait).
  virtual bool holdsSend(const Request* r) const = 0;
  // Forgets every request (after an abort).
  virtual void clear() noexcept = 0;

  // Control, for a link that carries data only and leans on another link of the same peer for
  // the rest (wake-ups, the reason of an abort, the end of the connection).
  // Whether the peer has left (its connection ended after its goodbye).
  virtual bool peerLeft() const = 0;
  // Throws the error for a peer that left while this rank still exchanges data with it.
  virtual void throwPeerLeft() = 0;
  // Asks a sleeping peer to look at its other links again. Never blocks for long, never throws.
  virtual void wakePeer() noexcept = 0;
  // Throws the peer's own account of its abort, waiting a little for it to arrive.
  virtual void throwPeerAbort() = 0;
};

}  // namespace chorus::transport
