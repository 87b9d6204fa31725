// chorus.Error: the Python face of chorus::Error, a RuntimeError with a `.code` attribute.
#pragma once

#include <chorus/error.hpp>

#include <pybind11/pybind11.h>

#include <exception>

namespace chorus::python {

// Creates chorus.Error in module m and translates every chorus::Error thrown through pybind11
// into it.
void registerErrors(pybind11::module_& m);

// The ErrorCode name Python sees in `.code`: "TIMEOUT", "PEER_FAILURE", "MISMATCH", ...
const char* codeName(ErrorCode code);

// A chorus.Error instance (or the matching Python exception for any other C++ exception) for a
// failure held in an exception_ptr, for Work.exception(). None for nullptr. Needs the GIL.
pybind11::object exceptionObject(const std::exception_ptr& failure);

}  // namespace chorus::python
