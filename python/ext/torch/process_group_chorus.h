// The torch.distributed backend "chorus": every collective torch defines, on CPU tensors of
// every dtype, run by one Chorus communicator per group. The communicator meets its peers through
// the c10d Store torch hands the backend; the group's timeout, or CHORUS_TIMEOUT where shorter
// (timeout_rule.h), is the deadline of every step.
//
// torch 2.x: a c10d::Backend, which torch's ProcessGroup calls for the CPU device. torch 1.13
// (Debian): a c10d::ProcessGroup of its own. The two share every operation's signature.
#pragma once

#include "future_completer.h"
#include "work_chorus.h"

#include <chorus/communicator.hpp>
#include <chorus/options.hpp>
#include <chorus/store.hpp>

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

// Backend virtuals that appeared in 2.7 (abort(), shutdown(), supportsCoalescing()); without
// them this still compiles against 2.6's headers, though 2.6's PyPI wheels use the old libstdc++
// ABI, which libchorus does not (scripts/install-torch2).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 7)
#define CHORUS_TORCH_BACKEND_ABORT 1
#else
#define CHORUS_TORCH_BACKEND_ABORT 0
#endif

// torch's in-place reconfigure contract (a Backend whose rank and size may change, which torch's
// ProcessGroup then reports): where the headers have it, a group can shrink in place.
#ifdef C10D_BACKEND_HAS_RECONFIGURE
#define CHORUS_TORCH_RECONFIGURE 1
#else
#define CHORUS_TORCH_RECONFIGURE 0
#endif

namespace chorus::torch_backend {

class SignalAbort;

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

// How an operation with these options runs: torch 2.x's Python API passes asyncOp = false when
// it waits for the Work right after issuing it (async_op=False); options without the field
// (torch 1.13, some of 2.7's) run in the background, where wait() may still run them inline.
template <class Options>
Run runFor(const Options& opts) {
  if constexpr (requires { opts.asyncOp; }) {
    return opts.asyncOp ? Run::kInBackground : Run::kBlocking;
  } else {
    return Run::kInBackground;
  }
}

// What a membership change of a group did (process_group_shrink.cc).
struct MembershipChange {
  uint64_t generation = 0;  // changes since the group was created
  int rank = 0;             // this process's rank in the group now
  int size = 0;
  std::vector<int> formerRanks;  // for each rank now, its rank before the change (-1: newcomer)
  std::vector<int> lost;         // ranks before the change that are not members any more
};

// A string that names this process among the members of a group: host, pid and a random part.
std::string newReconfigureHandle();

class ProcessGroupChorus : public BackendBase {
 public:
  // globalRanks: the world ranks of this group's members (empty: the group is the world), for
  // error messages. Throws (RuntimeError) when the communicator cannot be created.
  ProcessGroupChorus(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout, std::vector<int64_t> globalRanks = {},
                     std::string groupName = {});
  // A group of the ranks of `parent` that passed the same color to split(): its communicator is
  // that split's child (it met in the parent's store, so it needs no torch store).
  ProcessGroupChorus(std::unique_ptr<Communicator> comm, const ProcessGroupChorus& parent,
                     std::vector<int64_t> globalRanks, std::string groupName);
  ~ProcessGroupChorus() override;

  const std::string getBackendName() const override { return "chorus"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
#if TORCH_VERSION_MAJOR >= 2
  // Sparse COO tensors, as allreduce() takes them too (sparse_allreduce.cc).
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts) override;
#endif
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
#if TORCH_VERSION_MAJOR >= 2
  // One collective per list (several when the dtypes differ); output i / input i as in
  // _allgather_base and _reduce_scatter_base. Functional collectives reach even a single tensor
  // through these.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  // Between the two, each operation is issued as usual (and returns its own Work); endCoalescing
  // returns one Work for all of them (batch_isend_irecv, _coalescing_manager with a device).
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
#endif
#if CHORUS_TORCH_BACKEND_ABORT
  bool supportsCoalescing() const override { return true; }
  // abort(): as abortGroup(). shutdown(): waits for the operations issued so far (their
  // failures are theirs to report), then closes the communicator; later calls fail clearly.
  void abort() override { abortGroup(); }
  void shutdown() override;
#endif
  // Operations issued on this group so far, the same on every rank that issued the same ones.
  uint64_t getSequenceNumberForGroup() override { return sequence_.load(); }
  void setSequenceNumberForGroup() override { sequence_ = 0; }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // Every rank reports to rank 0 through the store; rank 0 names the ranks that did not arrive
  // within the timeout (the first one, or all of them with waitAllRanks), and so do the others.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

  // What the last collective ran ("ring", "rd", ...) and how data reaches a peer ("shm", "tcp").
  std::string lastAlgorithm() const { return communicator("last_algorithm").lastAlgorithm(); }
  std::string transportTo(int peer) const { return communicator("transport_to").transportTo(peer); }
  // Fails every pending and later operation of this group at once (also on the peers).
  void abortGroup();

  // Membership (process_group_shrink.cc). shrinkInPlace: collective among the live ranks after
  // a failure (or when nothing failed, to admit waiting joiners): they agree on the members, and
  // this group goes on with them under a new rank and size. Only where torch lets a backend's
  // rank and size change (CHORUS_TORCH_RECONFIGURE); elsewhere a clear error.
  // gone: more ranks that the caller knows to be gone or leaving (Communicator::shrink(gone)).
  MembershipChange shrinkInPlace(const std::vector<int>& gone = {});
  // Ranks of the group known to have failed (Communicator::failedRanks); never blocks.
  std::vector<int> failedRanks() const;
  // Collective over this group (Communicator::split): the ranks that pass the same color form a
  // new group, ranked by key; null for a negative color. globalRanks: its members' global ranks.
  c10::intrusive_ptr<ProcessGroupChorus> split(int color, int key, std::vector<int64_t> globalRanks,
                                               std::string groupName);
  // Why the group's communicator failed (its first error), or "" while it works.
  std::string failure() const;
  // The group's membership now (rank and size also through getRank/getSize), and the newcomers
  // waiting to join it (a store read, not collective).
  MembershipChange membership() const;
  int joinersWaiting() const;
  int sparesWaiting() const;
  // The communicator's stall check and pause flag (chorus::Communicator::setStallTimeout,
  // setPaused); a shrink or join makes a new communicator, with both off.
  void setStallTimeout(double seconds) {
    communicator("set_stall_timeout").setStallTimeout(seconds);
  }
  void setPaused(bool paused) { communicator("set_paused").setPaused(paused); }
  // A replacement (CHORUS_JOIN=1): whether its default group still has to join, and the join:
  // waits (within the group's timeout) until the running ranks admit it at a membership
  // change, then takes the rank and size it gets there.
  bool joinPending() const;
  MembershipChange joinNow();
#if CHORUS_TORCH_RECONFIGURE
  // torch's reconfigure contract: the handle names this process; reconfigure() shrinks in place
  // and checks that the members Chorus agreed on are the ones the handles name.
  bool supportsReconfigure() const override { return true; }
  c10d::ReconfigureHandle get_reconfigure_handle() const override { return handle_; }
  c10::intrusive_ptr<c10d::Work> reconfigure(const c10d::ReconfigureOptions& opts) override;
#endif

 private:
  // allreduce() of a sparse COO tensor: SUM of every rank's entries, coalesced.
  c10::intrusive_ptr<c10d::Work> allreduceSparse(at::Tensor& tensor,
                                                 const c10d::AllreduceOptions& opts);
  // Creates the Work, issues the operation (issue(run) returns the Chorus work) and ties them.
  // run: Run::kBlocking when torch waits for the Work at once (runFor): the operation then runs
  // on this thread before launch returns, with no hand-over to the communicator's worker (inside
  // a coalescing batch it still runs in the background). Its failure is the Work's, as in the
  // background; only a misuse found before it started (kInvalidArgument) throws here.
  c10::intrusive_ptr<c10d::Work> launch(c10d::OpType type, const char* title,
                                        std::vector<at::Tensor> outputs,
                                        std::vector<at::Tensor> keepAlive,
                                        std::function<void()> copyOut,
                                        const std::function<chorus::Work(Run)>& issue,
                                        std::shared_ptr<void> extra = nullptr, int source = -1,
                                        Run run = Run::kInBackground);
  // The same for an operation of several Chorus calls: issue appends each one it made to the
  // list, in order (those it made before a failure are still tied to the Work).
  c10::intrusive_ptr<c10d::Work> launchParts(
      c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
      std::vector<at::Tensor> keepAlive, std::function<void()> copyOut,
      const std::function<void(std::vector<chorus::Work>&)>& issue,
      std::shared_ptr<void> extra = nullptr, int source = -1);
  // A replacement's default group (CHORUS_JOIN=1, process_group_shrink.cc) is made without a
  // communicator; joinNow() gets one.
  static bool joinsRunningJob(const std::vector<int64_t>& globalRanks, int size);
  // Under a launcher that serves its own store (chorus-run: CHORUS_STORE), the default group
  // meets there, under a prefix, and not in torch's store, which env:// hosts in rank 0: so
  // losing rank 0 does not take the membership agreement down. Null for other groups.
  static std::shared_ptr<Store> jobStoreFor(const std::vector<int64_t>& globalRanks, int size,
                                            const std::shared_ptr<Store>& launcher);
  // After a membership change, rank 0 copies it where the launcher reads it.
  void announceChange(int rank) const;
  // The communicator, or a clear error once shutdown() closed it.
  Communicator& communicator(const char* op) const;
  std::string describeGroup() const;

  // torch's store, through the bridge that never lets a c10d wait time out (store_bridge.h).
  std::shared_ptr<Store> store_;
  // The store the communicator meets at (store_, or the launcher's: jobStoreFor), and the
  // launcher's store when it is that one.
  std::shared_ptr<Store> meetStore_;
  std::shared_ptr<Store> launcher_;
  std::chrono::milliseconds timeout_;
  std::vector<int64_t> globalRanks_;
  std::string groupName_;
  std::shared_ptr<FutureCompleter> completer_ = std::make_shared<FutureCompleter>();
  std::unique_ptr<chorus::Communicator> comm_;
  std::shared_ptr<SignalAbort> signalAbort_;  // what Ctrl-C in a wait runs (signal_abort.h)
  std::atomic<uint64_t> monitoredBarriers_{0};
  std::atomic<uint64_t> sequence_{0};
  // Guarded by mu_: the batch being coalesced (startCoalescing .. endCoalescing), the last
  // operation issued (what shutdown() waits for), and whether shutdown() closed the group.
  mutable std::mutex mu_;
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<WorkChorus>> batch_;
  chorus::Work lastPart_;
  bool closed_ = false;
  // This process's reconfigure handle, and the uuids reconfigure() was given so far.
  std::string handle_;
  // Set while a replacement's group waits for joinNow() (guarded by mu_).
  std::optional<chorus::Options> joinOptions_;
  std::vector<int64_t> reconfigureUuids_;
};

}  // namespace chorus::torch_backend
