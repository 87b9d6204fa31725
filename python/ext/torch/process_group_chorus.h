// The torch.distributed backend "chorus" (torch 1.13's c10d::ProcessGroup): every collective
// torch defines, on CPU tensors of every dtype, run by one Chorus communicator per group. The
// communicator meets its peers through the c10d Store torch hands the backend, and the group's
// timeout is the deadline of every step.
#pragma once

#include "future_completer.h"
#include "work_chorus.h"

#include <chorus/communicator.hpp>
#include <chorus/store.hpp>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus::torch_backend {

class ProcessGroupChorus : public c10d::ProcessGroup {
 public:
  // globalRanks: the world ranks of this group's members (empty: the group is the world), for
  // error messages. Throws (RuntimeError) when the communicator cannot be created.
  ProcessGroupChorus(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout, std::vector<int64_t> globalRanks = {},
                     std::string groupName = {});
  ~ProcessGroupChorus() override;

  const std::string getBackendName() const override { return "chorus"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
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
  std::string lastAlgorithm() const { return comm_->lastAlgorithm(); }
  std::string transportTo(int peer) const { return comm_->transportTo(peer); }
  // Fails every pending and later operation of this group at once (also on the peers).
  void abortGroup() { comm_->abort(); }

 private:
  // Creates the Work, issues the operation (issue returns the Chorus work) and ties them.
  c10::intrusive_ptr<c10d::Work> launch(c10d::OpType type, const char* title,
                                        std::vector<at::Tensor> outputs,
                                        std::vector<at::Tensor> keepAlive,
                                        std::function<void()> copyOut,
                                        const std::function<chorus::Work()>& issue,
                                        std::shared_ptr<void> extra = nullptr, int source = -1);
  std::string describeGroup() const;

  // torch's store, through the bridge that never lets a c10d wait time out (store_bridge.h).
  std::shared_ptr<Store> store_;
  std::chrono::milliseconds timeout_;
  std::vector<int64_t> globalRanks_;
  std::string groupName_;
  std::shared_ptr<FutureCompleter> completer_ = std::make_shared<FutureCompleter>();
  std::unique_ptr<chorus::Communicator> comm_;
  std::atomic<uint64_t> monitoredBarriers_{0};
};

}  // namespace chorus::torch_backend
