// A communicator's connection to its peers: the data path plus its lifecycle (interrupt, abort,
// close), which belongs to the communicator alone.
#pragma once

#include "transport/data_path.h"

namespace chorus {
class Error;
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
};

}  // namespace chorus::transport
