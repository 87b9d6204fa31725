// What a virtual rank's algorithms talk through: the transport::Transport interface over the
// world's channels. Sends and receives match per ordered pair of ranks in post order, as on the
// real transports; a step, size or call mismatch is an error.
#pragma once

#include "sim/virtual_world.h"
#include "transport/transport.h"

#include <string>
#include <vector>

namespace chorus::sim {

struct Rank;

class VirtualTransport final : public transport::Transport {
 public:
  VirtualTransport(VirtualWorld::Impl* w, Rank* k) : w_(w), k_(k) {}
  void beginOp(const OpDesc& op) override;
  void postSend(transport::Request& r, int peer, const void* data, size_t bytes,
                uint32_t step) override;
  void postRecv(transport::Request& r, int peer, void* data, size_t bytes, uint32_t step) override;
  void wait(transport::Request& r, Deadline) override;
  void poll(Deadline) override;
  void interrupt() noexcept override {}
  void abort(const Error&) noexcept override {}
  void close() noexcept override {}
  std::string peerAddress(int peer) const override {
    return "virtual rank " + std::to_string(peer);
  }
  const char* pathTo(int peer) const override;
  const std::vector<std::string>& hosts() const override;

 private:
  VirtualWorld::Impl* w_;
  Rank* k_;
};

}  // namespace chorus::sim
