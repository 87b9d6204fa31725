#include "py_work.h"

#include "errors.h"
#include "py_communicator.h"

#include "../common/signal_wait.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace py = pybind11;

namespace chorus::python {

PyWork::PyWork(Work work, py::object communicator, std::vector<std::shared_ptr<HeldBuffer>> held)
    : work_(std::move(work)), communicator_(std::move(communicator)), held_(std::move(held)) {}

PyWork::~PyWork() {
  if (held_.empty() || work_.isCompleted()) return;
  py::gil_scoped_release release;
  try {
    work_.wait();
  } catch (...) {
    // Reported by the communicator's next call; a destructor cannot raise.
  }
}

void abortAndSettle(Communicator& comm, const Work& work) {
  comm.abort();
  try {
    work.wait();  // aborted: it fails at once
  } catch (...) {
    // The signal handler's exception is what the caller raises.
  }
}

bool PyWork::wait(std::optional<double> timeoutSeconds) {
  if (timeoutSeconds && !(*timeoutSeconds >= 0)) {
    throw py::value_error("timeout must be >= 0 seconds");
  }
  std::chrono::milliseconds ms{0};
  if (timeoutSeconds) {
    ms = std::chrono::milliseconds(
        static_cast<int64_t>(std::ceil(std::min(*timeoutSeconds, 1e9) * 1000.0)));
  }
  // On Python's main thread Ctrl-C aborts the communicator and raises KeyboardInterrupt
  // (python/ext/common/signal_wait.h).
  auto& owner = communicator_.cast<PyCommunicator&>();
  Communicator* comm = owner.comm.get();  // null once closed
  bool done = true;
  if (timeoutSeconds && ms.count() > 0) {
    done = python_signals::waitInterruptibly(
        [this](std::chrono::milliseconds slice) { return work_.wait(slice); }, ms,
        [&] {
          if (comm) abortAndSettle(*comm, work_);
        });
  } else {
    py::gil_scoped_release release;
    if (timeoutSeconds) {
      done = work_.wait(ms);  // zero: one look
    } else {
      const python_signals::BlockingSection section([comm] {
        if (comm) comm->abort();
      });
      try {
        work_.wait();
      } catch (...) {
        python_signals::raiseIfSignalled();
        throw;
      }
    }
  }
  releaseIfDone();
  return done;
}

bool PyWork::isCompleted() {
  releaseIfDone();
  return work_.isCompleted();
}

py::object PyWork::exception() const { return exceptionObject(work_.exception()); }

void PyWork::releaseIfDone() {
  if (!held_.empty() && work_.isCompleted()) held_.clear();
}

}  // namespace chorus::python
