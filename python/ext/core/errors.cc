#include "errors.h"

#include <string>

namespace py = pybind11;

namespace chorus::python {

namespace {

// The exception type, created once at import; a strong reference kept for the process lifetime
// (the module never unloads).
PyObject* errorType = nullptr;

py::object makeError(const Error& e) {
  py::object instance =
      py::reinterpret_steal<py::object>(PyObject_CallFunction(errorType, "s", e.what()));
  if (!instance) throw py::error_already_set();
  instance.attr("code") = codeName(e.code());
  return instance;
}

}  // namespace

const char* codeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "OK";
    case ErrorCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case ErrorCode::kTimeout:
      return "TIMEOUT";
    case ErrorCode::kPeerFailure:
      return "PEER_FAILURE";
    case ErrorCode::kMismatch:
      return "MISMATCH";
    case ErrorCode::kAborted:
      return "ABORTED";
    case ErrorCode::kSystem:
      return "SYSTEM";
    case ErrorCode::kInternal:
      return "INTERNAL";
  }
  return "UNKNOWN";
}

void registerErrors(py::module_& m) {
  py::dict attributes;
  attributes["__doc__"] =
      "A failure reported by the Chorus library (lost peer, timeout, mismatched calls, abort).\n\n"
      "``code`` names the kind: 'INVALID_ARGUMENT', 'TIMEOUT', 'PEER_FAILURE', 'MISMATCH',\n"
      "'ABORTED', 'SYSTEM' or 'INTERNAL'. After such a failure the communicator is aborted: every\n"
      "later call on it raises too.";
  attributes["code"] = "INTERNAL";  // class default, replaced on every instance raised here
  errorType = PyErr_NewException("chorus._core.Error", PyExc_RuntimeError, attributes.ptr());
  if (errorType == nullptr) throw py::error_already_set();
  m.add_object("Error", py::reinterpret_borrow<py::object>(errorType));

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      py::object instance = makeError(e);
      PyErr_SetObject(errorType, instance.ptr());
    }
  });
}

py::object exceptionObject(const std::exception_ptr& failure) {
  if (!failure) return py::none();
  try {
    std::rethrow_exception(failure);
  } catch (const Error& e) {
    return makeError(e);
  } catch (const std::exception& e) {
    return py::reinterpret_borrow<py::object>(PyExc_RuntimeError)(e.what());
  } catch (...) {
    return py::reinterpret_borrow<py::object>(PyExc_RuntimeError)("unknown C++ exception");
  }
}

}  // namespace chorus::python
