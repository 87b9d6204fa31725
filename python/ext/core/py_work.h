// chorus.Work: the handle of a non-blocking operation (async_op=True). It holds the buffers the
// operation reads and writes, and the communicator, until the operation has finished.
#pragma once

#include "buffer_args.h"

#include <chorus/communicator.hpp>
#include <chorus/work.hpp>

#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <vector>

namespace chorus::python {

// Aborts comm (its peers fail at once, naming this rank) and waits for work, which then ends
// promptly, so that its buffers may be released: what a wait interrupted by a signal does.
void abortAndSettle(Communicator& comm, const Work& work);

class PyWork {
 public:
  PyWork(Work work, pybind11::object communicator, std::vector<std::shared_ptr<HeldBuffer>> held);
  // A Work dropped while its operation runs waits for it (GIL released): the operation writes
  // into buffers the Work keeps exported. The wait ends at the latest at the communicator's
  // timeout; a failure there is not raised (the communicator is aborted: the next call raises).
  ~PyWork();
  PyWork(const PyWork&) = delete;
  PyWork& operator=(const PyWork&) = delete;

  // Blocks (GIL released) until the operation finished, or at most timeout seconds. True once
  // finished; False if the timeout passed first. Raises chorus.Error if the operation failed.
  // On Python's main thread a signal handler that raises (Ctrl-C) aborts the communicator and
  // its exception comes out of here (python/ext/common/signal_wait.h).
  bool wait(std::optional<double> timeoutSeconds);
  bool isCompleted();
  // The chorus.Error the operation failed with, None while running or after success.
  pybind11::object exception() const;

 private:
  void releaseIfDone();  // drops the buffers once the operation no longer needs them

  Work work_;
  pybind11::object communicator_;
  std::vector<std::shared_ptr<HeldBuffer>> held_;
};

}  // namespace chorus::python
