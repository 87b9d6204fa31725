// chorus.Communicator: the collectives of chorus::Communicator on buffer-protocol objects.
#pragma once

#include <chorus/communicator.hpp>

#include <pybind11/pybind11.h>

#include <memory>

namespace chorus::python {

// Adds Communicator (and its methods) to module m; Work must be registered first.
void registerCommunicator(pybind11::module_& m);

// What the Python Communicator object holds.
struct PyCommunicator {
  explicit PyCommunicator(std::unique_ptr<Communicator> c)
      : comm(std::move(c)), rank(comm->rank()), size(comm->size()) {}
  PyCommunicator(PyCommunicator&&) = default;
  PyCommunicator& operator=(PyCommunicator&&) = default;
  // Destroying a communicator joins its worker, which may be finishing an operation with a
  // peer: other Python threads run meanwhile.
  ~PyCommunicator() { close(); }
  // Destroys the communicator now (close(), the end of a with block); later calls raise
  // ValueError. Idempotent.
  void close();

  std::unique_ptr<Communicator> comm;  // null once closed
  int rank;                            // kept for messages and repr after close()
  int size;
};

}  // namespace chorus::python
