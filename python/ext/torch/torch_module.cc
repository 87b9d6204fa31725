// chorus._torch: the creator torch.distributed calls for backend "chorus", and a few
// Chorus-specific queries on such a group. Imported by chorus.torch after torch itself.
#include "process_group_chorus.h"

#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/python.h>

namespace py = pybind11;
using chorus::torch_backend::ProcessGroupChorus;

namespace {

ProcessGroupChorus& chorusGroup(const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
  auto* p = dynamic_cast<ProcessGroupChorus*>(pg.get());
  TORCH_CHECK_TYPE(p != nullptr, "not a process group of the chorus backend (it is ",
                   pg->getBackendName(), ")");
  return *p;
}

}  // namespace

PYBIND11_MODULE(_torch, m) {
  m.doc() = "The torch.distributed backend 'chorus' (import chorus.torch to register it).";
  m.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout, std::vector<int64_t> globalRanks,
         std::string groupName) -> c10::intrusive_ptr<c10d::ProcessGroup> {
        return c10::make_intrusive<ProcessGroupChorus>(
            store, rank, size, timeout, std::move(globalRanks), std::move(groupName));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("global_ranks") = std::vector<int64_t>{}, py::arg("group_name") = std::string(),
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "last_algorithm",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
        return chorusGroup(pg).lastAlgorithm();
      },
      "The algorithm the group's last collective ran ('ring', 'rd', ...).");
  m.def(
      "transport_to",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg, int peer) {
        return chorusGroup(pg).transportTo(peer);
      },
      "How data reaches a peer of the group: 'shm', 'tcp' or 'self'.");
  m.def(
      "abort",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) { chorusGroup(pg).abortGroup(); },
      "Fails every pending and later operation of the group, here and on its peers.");
}
