// A subgroup's view of its communicator's transport: group rank i is the parent's rank
// members[i]. The hierarchical algorithms run the ordinary collectives over such views (the ranks
// of one host, or one rank of every host) on the parent's connections, shared memory within a
// host and TCP between hosts, without connecting anything again.
#pragma once

#include "transport/transport.h"

#include <vector>

namespace chorus::algo {

class SubTransport final : public transport::Transport {
 public:
  SubTransport(transport::Transport* parent, std::vector<int> members)
      : parent_(parent), members_(std::move(members)) {}

  // The parent began the collective; its frames carry the parent's call.
  void beginOp(const OpDesc&) override {}
  void postSend(transport::Request& r, int peer, const void* data, size_t bytes,
                uint32_t step) override {
    parent_->postSend(r, members_.at(static_cast<size_t>(peer)), data, bytes, step);
  }
  void postRecv(transport::Request& r, int peer, void* data, size_t bytes, uint32_t step) override {
    parent_->postRecv(r, members_.at(static_cast<size_t>(peer)), data, bytes, step);
  }
  void wait(transport::Request& r, Deadline deadline) override { parent_->wait(r, deadline); }
  void poll(Deadline deadline) override { parent_->poll(deadline); }
  void pollStuckOn(const transport::Request& r, Deadline deadline) override {
    parent_->pollStuckOn(r, deadline);
  }
  // Lifetime and failure belong to the parent.
  void interrupt() noexcept override {}
  void abort(const Error&) noexcept override {}
  void close() noexcept override {}
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
  transport::Transport* parent_;
  std::vector<int> members_;
  mutable std::vector<std::string> hosts_;
};

}  // namespace chorus::algo
