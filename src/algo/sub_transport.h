// A subgroup's view of its communicator's data path: group rank i is the parent's rank
// members[i]. The hierarchical algorithms run the ordinary collectives over such views (the ranks
// of one host, or one rank of every host) on the parent's connections, shared memory within a
// host and TCP between hosts, without connecting anything again. Lifetime and failure stay with
// the parent's transport.
#pragma once

#include "transport/data_path.h"

#include <vector>

namespace chorus::algo {

class SubTransport final : public transport::DataPath {
 public:
  SubTransport(transport::DataPath* parent, std::vector<int> members)
      : parent_(parent), members_(std::move(members)) {}

  // A collective begun on a view is begun on the connections it shares with its parent.
  void beginOp(const OpDesc& op) override { parent_->beginOp(op); }
  void postSend(transport::Request& r, int peer, const void* data, size_t bytes,
                uint32_t step) override {
    parent_->postSend(r, members_.at(static_cast<size_t>(peer)), data, bytes, step);
  }
  void postRecv(transport::Request& r, int peer, void* data, size_t bytes, uint32_t step) override {
    parent_->postRecv(r, members_.at(static_cast<size_t>(peer)), data, bytes, step);
  }
  bool reducesOnReceive(int peer) const override {
    return parent_->reducesOnReceive(members_.at(static_cast<size_t>(peer)));
  }
  void postRecvReduce(transport::Request& r, int peer, void* dst, const void* mine, size_t bytes,
                      uint32_t step, transport::CombineFn fn, size_t elementBytes) override {
    parent_->postRecvReduce(r, members_.at(static_cast<size_t>(peer)), dst, mine, bytes, step, fn,
                            elementBytes);
  }
  void wait(transport::Request& r, Deadline deadline) override { parent_->wait(r, deadline); }
  void poll(Deadline deadline) override { parent_->poll(deadline); }
  void pollStuckOn(const transport::Request& r, Deadline deadline) override {
    parent_->pollStuckOn(r, deadline);
  }
  void allowSpinning(bool allowed) override { parent_->allowSpinning(allowed); }
  std::string peerAddress(int peer) const override {
    return parent_->peerAddress(members_.at(static_cast<size_t>(peer)));
  }
  // Built on first use: a simulated world of many ranks (src/sim) holds thousands of these.
  const std::vector<std::string>& hosts() const override {
    if (hosts_.size() != members_.size()) {
      const auto& all = parent_->hosts();
      hosts_.clear();
      for (int m : members_) hosts_.push_back(all.at(static_cast<size_t>(m)));
    }
    return hosts_;
  }
  const char* pathTo(int peer) const override {
    return parent_->pathTo(members_.at(static_cast<size_t>(peer)));
  }

 private:
  transport::DataPath* parent_;
  std::vector<int> members_;
  mutable std::vector<std::string> hosts_;
};

}  // namespace chorus::algo
