// chorus.Options: chorus::Options from Python (py_options.cc).
#pragma once

#include <chorus/options.hpp>

#include <pybind11/pybind11.h>

namespace chorus::python {

// Adds Options to module m; before Communicator, whose methods take it.
void registerOptions(pybind11::module_& m);

}  // namespace chorus::python
