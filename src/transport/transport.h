// A communicator's connection to its peers: the data path plus its lifecycle (interrupt, abort,
// close), which belongs to the communicator alone.
#pragma once

#include "transport/data_path.h"

#include <cstdint>
#include <vector>

namespace chorus {
class Error;
}
namespace chorus::trace {
class Recorder;
}

namespace chorus::transport {

// One transport instance per communicator. After a failure the transport is broken: the caller
// then calls abort().
class Transport : public DataPath {
 public:
  // Makes a wait on another thread throw Error(kAborted) promptly. Thread-safe, never blocks.
  virtual void interrupt() noexcept = 0;
  // Tells every peer why this rank gives up (best effort), closes all connections and forgets
  // pending requests. Never blocks.
  virtual void abort(const Error& cause) noexcept = 0;
  // Clean shutdown after the last collective: peers learn that this rank left on purpose.
  virtual void close() noexcept = 0;
  // Where the traffic and waits of each call are recorded (null: nowhere). Set before the first
  // call; the recorder outlives the transport.
  virtual void attachRecorder(trace::Recorder* recorder) { (void)recorder; }
  // 64 bits of the id the ranks agreed on at rendezvous (0 when there is none).
  virtual uint64_t communicatorId() const { return 0; }
  // Peers this transport saw fail, ascending: connection lost, closed while data was due, or
  // timed out (a peer that sent its abort message is alive and not listed). Thread-safe, never
  // blocks; still answers after abort().
  virtual std::vector<int> failedPeers() const { return {}; }
  // Payload bytes handed to the links by postSend so far (Communicator::bytesSent). Thread-safe.
  virtual uint64_t bytesSent() const { return 0; }
};

}  // namespace chorus::transport
