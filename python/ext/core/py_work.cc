#include "py_work.h"

#include "errors.h"

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

bool PyWork::wait(std::optional<double> timeoutSeconds) {
  if (timeoutSeconds && !(*timeoutSeconds >= 0)) {
    throw py::value_error("timeout must be >= 0 seconds");
  }
  bool done = true;
  {
    py::gil_scoped_release release;
    if (!timeoutSeconds) {
      work_.wait();
    } else {
      const auto ms = std::chrono::milliseconds(
          static_cast<int64_t>(std::ceil(std::min(*timeoutSeconds, 1e9) * 1000.0)));
      done = work_.wait(ms);
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
