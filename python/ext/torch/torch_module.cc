// chorus._torch: the creator torch.distributed calls for backend "chorus", and a few
// Chorus-specific queries on such a backend. Imported by chorus.torch after torch itself.
// torch 2.x: the creator returns a c10d.Backend (torch wraps it in a ProcessGroup) and the
// queries take that Backend (ProcessGroup._get_backend(torch.device("cpu"))); torch 1.13: both
// are the ProcessGroup itself.
#include "launcher_store.h"
#include "process_group_chorus.h"

#include "../common/signal_wait.h"

#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/python.h>

namespace py = pybind11;
using chorus::torch_backend::BackendBase;
using chorus::torch_backend::ProcessGroupChorus;

namespace {

ProcessGroupChorus& chorusGroup(const c10::intrusive_ptr<BackendBase>& pg) {
  TORCH_CHECK_TYPE(pg, "not a process group of the chorus backend");
  auto* p = dynamic_cast<ProcessGroupChorus*>(pg.get());
  TORCH_CHECK_TYPE(p != nullptr, "not a process group of the chorus backend (it is ",
                   pg->getBackendName(), ")");
  return *p;
}

const std::string kAppPrefix = "torch/app/";

std::shared_ptr<chorus::Store> jobStore() {
  auto store = chorus::torch_backend::launcherStore(0, chorus::AuthOptions::fromEnv());
  TORCH_CHECK(store, "chorus.torch.job_store: no launcher store (CHORUS_STORE is not set, or ",
              "it could not be opened)");
  return store;
}

}  // namespace

PYBIND11_MODULE(_torch, m) {
  m.doc() = "The torch.distributed backend 'chorus' (import chorus.torch to register it).";
  chorus::python_signals::rememberMainThread();
  // The torch this module was built against, for chorus.torch to compare with the one imported.
  m.attr("built_for_torch") = std::to_string(TORCH_VERSION_MAJOR) + "." +
                              std::to_string(TORCH_VERSION_MINOR) + "." +
                              std::to_string(TORCH_VERSION_PATCH);
  m.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout, std::vector<int64_t> globalRanks,
         std::string groupName) -> c10::intrusive_ptr<BackendBase> {
        return c10::make_intrusive<ProcessGroupChorus>(
            store, rank, size, timeout, std::move(globalRanks), std::move(groupName));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("global_ranks") = std::vector<int64_t>{}, py::arg("group_name") = std::string(),
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "last_algorithm",
      [](const c10::intrusive_ptr<BackendBase>& pg) { return chorusGroup(pg).lastAlgorithm(); },
      "The algorithm the group's last collective ran ('ring', 'rd', ...).");
  m.def(
      "transport_to",
      [](const c10::intrusive_ptr<BackendBase>& pg, int peer) {
        return chorusGroup(pg).transportTo(peer);
      },
      "How data reaches a peer of the group: 'shm', 'tcp' or 'self'.");
  m.attr("can_shrink") = static_cast<bool>(CHORUS_TORCH_RECONFIGURE);
  m.def(
      "shrink",
      [](const c10::intrusive_ptr<BackendBase>& pg, const std::vector<int>& gone) {
        ProcessGroupChorus& group = chorusGroup(pg);
        chorus::torch_backend::MembershipChange c;
        {
          const py::gil_scoped_release noGil;
          c = group.shrinkInPlace(gone);
        }
        return py::make_tuple(c.generation, c.rank, c.size, c.formerRanks, c.lost);
      },
      py::arg("pg"), py::arg("gone") = std::vector<int>{},
      "Collective among the live ranks: they agree on the members (not waiting for the ranks in "
      "`gone`) and the group goes on with them; returns (generation, rank, size, former_ranks, "
      "lost_ranks).");
  m.def(
      "split",
      [](const c10::intrusive_ptr<BackendBase>& pg, int color, int key,
         std::vector<int64_t> globalRanks, std::string name) -> c10::intrusive_ptr<BackendBase> {
        return chorusGroup(pg).split(color, key, std::move(globalRanks), std::move(name));
      },
      "Collective over the group: the ranks that pass the same color form a new chorus backend, "
      "ranked by key (None for a negative color).");
  m.def(
      "failed_ranks",
      [](const c10::intrusive_ptr<BackendBase>& pg) { return chorusGroup(pg).failedRanks(); },
      "Ranks of the group known to have failed so far (never blocks).");
  m.def(
      "membership",
      [](const c10::intrusive_ptr<BackendBase>& pg) {
        const auto c = chorusGroup(pg).membership();
        return py::make_tuple(c.generation, c.rank, c.size, c.formerRanks);
      },
      "(generation, rank, size, former_ranks) of the group's communicator now.");
  m.def(
      "join_pending",
      [](const c10::intrusive_ptr<BackendBase>& pg) { return chorusGroup(pg).joinPending(); },
      "Whether this replacement's default group (CHORUS_JOIN=1) has yet to join the job.");
  m.def(
      "join",
      [](const c10::intrusive_ptr<BackendBase>& pg) {
        ProcessGroupChorus& group = chorusGroup(pg);
        chorus::torch_backend::MembershipChange c;
        {
          const py::gil_scoped_release noGil;
          c = group.joinNow();
        }
        return py::make_tuple(c.generation, c.rank, c.size, c.formerRanks);
      },
      "A replacement joins the running job: waits until admitted; returns (generation, rank, "
      "size, former_ranks).");
  m.def(
      "joiners_waiting",
      [](const c10::intrusive_ptr<BackendBase>& pg) { return chorusGroup(pg).joinersWaiting(); },
      "Newcomers waiting to join the group at its next membership change (not collective).",
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "spares_waiting",
      [](const c10::intrusive_ptr<BackendBase>& pg) { return chorusGroup(pg).sparesWaiting(); },
      "Newcomers waiting beyond the room the job has: spares of a full job (not collective).",
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "set_stall_timeout",
      [](const c10::intrusive_ptr<BackendBase>& pg, double seconds) {
        chorusGroup(pg).setStallTimeout(seconds);
      },
      "While this rank waits in a call that long, a live peer in no call for as long is "
      "declared dead (0: off; needs the heartbeat).");
  m.def(
      "set_paused",
      [](const c10::intrusive_ptr<BackendBase>& pg, bool paused) {
        chorusGroup(pg).setPaused(paused);
      },
      "This rank is away from the collectives on purpose: peers' stall checks pass it over.");
  m.def(
      "failure",
      [](const c10::intrusive_ptr<BackendBase>& pg) { return chorusGroup(pg).failure(); },
      "Why the group's communicator failed (its first error), or '' while it works.");
  // The launcher's store (CHORUS_STORE), for an application's own keys that must outlive any
  // rank (torch's env:// store lives in rank 0): under "torch/app/".
  m.def(
      "job_store_available",
      [] {
        return chorus::torch_backend::launcherStore(0, chorus::AuthOptions::fromEnv()) != nullptr;
      },
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "job_store_set",
      [](const std::string& key, const std::string& value) {
        jobStore()->set(kAppPrefix + key, chorus::Store::Bytes(value.begin(), value.end()));
      },
      py::call_guard<py::gil_scoped_release>());
  m.def("job_store_get", [](const std::string& key, std::chrono::milliseconds timeout) {
    chorus::Store::Bytes value;
    {
      const py::gil_scoped_release noGil;
      value = jobStore()->get(kAppPrefix + key, timeout);
    }
    return py::bytes(reinterpret_cast<const char*>(value.data()), value.size());
  });
  m.def(
      "job_store_check",
      [](const std::string& key) { return jobStore()->check({kAppPrefix + key}); },
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "abort", [](const c10::intrusive_ptr<BackendBase>& pg) { chorusGroup(pg).abortGroup(); },
      "Fails every pending and later operation of the group, here and on its peers.");
}
