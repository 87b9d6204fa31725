// chorus._core: the library's collectives on buffer-protocol objects (numpy), without torch.
// The package `chorus` re-exports what is here.
#include "../common/signal_wait.h"
#include "errors.h"
#include "py_communicator.h"
#include "py_options.h"
#include "py_work.h"

#include <chorus/launch.hpp>
#include <chorus/types.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;
using namespace pybind11::literals;
using chorus::ReduceOp;
using chorus::python::PyWork;

PYBIND11_MODULE(_core, m) {
  m.doc() = "Chorus collectives on buffer-protocol objects (numpy arrays), without torch.";
  chorus::python_signals::rememberMainThread();
  chorus::python::registerErrors(m);

  py::enum_<ReduceOp>(m, "ReduceOp",
                      "Reduction operations; the strings 'sum', 'prod', 'min', "
                      "'max' and 'avg' name them too.")
      .value("SUM", ReduceOp::kSum)
      .value("PROD", ReduceOp::kProd)
      .value("MIN", ReduceOp::kMin)
      .value("MAX", ReduceOp::kMax)
      .value("AVG", ReduceOp::kAvg);

  py::class_<PyWork>(m, "Work", R"doc(
The handle of an operation started with ``async_op=True``.

It keeps the operation's buffers exported (a bytearray cannot resize, a numpy array stays
alive) until the operation finished. Dropping a Work whose operation still runs waits for it.)doc")
      .def("wait", &PyWork::wait, "timeout"_a = py::none(),
           R"doc(Blocks (the GIL released) until the operation finished, or at most ``timeout``
seconds. Returns True once it finished, False if the timeout passed first. Raises
chorus.Error if the operation failed. Ctrl-C raises KeyboardInterrupt and aborts the
communicator.)doc")
      .def("is_completed", &PyWork::isCompleted,
           "True once the operation finished, successfully or not. Never blocks.")
      .def("exception", &PyWork::exception,
           "The chorus.Error the operation failed with; None while it runs or after success.");

  chorus::python::registerOptions(m);
  chorus::python::registerCommunicator(m);

  m.def(
      "launch_info",
      [] {
        const chorus::LaunchInfo l = chorus::launchInfoFromEnv();
        return py::dict("rank"_a = l.rank, "size"_a = l.size, "local_rank"_a = l.localRank,
                        "local_size"_a = l.localSize, "launcher"_a = l.launcher,
                        "store"_a = l.store, "store_from"_a = l.storeFrom);
      },
      R"doc(Where this process sits in its job, as its launcher says, before any communicator
exists: a dict with rank, size, local_rank and local_size (-1 when the launcher does not say),
launcher ("chorus", "torchrun", "Open MPI", "MPICH (Hydra)", "Slurm" or "alone"), store (the URL
the ranks meet at) and store_from (what gave it). Raises chorus.Error naming a launch variable
that is missing or malformed.)doc");
}
