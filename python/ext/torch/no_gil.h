// Releases the GIL for its lifetime when this thread holds it. Joining a communicator's worker
// (and the completer's threads) needs it released: they may be dropping the last reference to a
// tensor whose Python object Python gave up, which takes the GIL (destroy_process_group, a group
// collected by Python, the old communicator of a shrink).
#pragma once

#include <pybind11/pybind11.h>

#include <optional>

namespace chorus::torch_backend {

// Hidden like pybind11's own types, which it holds.
class __attribute__((visibility("hidden"))) NoGil {
 public:
  NoGil() {
#if PY_VERSION_HEX >= 0x030D0000
    const bool finalizing = Py_IsFinalizing();
#else
    const bool finalizing = _Py_IsFinalizing();
#endif
    if (Py_IsInitialized() && !finalizing && PyGILState_Check()) release_.emplace();
  }

 private:
  std::optional<pybind11::gil_scoped_release> release_;
};

}  // namespace chorus::torch_backend
