// The transport of one communicator: one link per peer, progress driven by the thread that waits
// (no transport thread, so no handoff between threads per message). Every peer has a TCP link
// (non-blocking socket, epoll); peers on the same host exchange data through a shared-memory link
// instead, and their TCP link stays for control: abort and goodbye messages, wake-ups of a
// sleeping rank, and the end-of-file the kernel delivers when the peer's process dies.
#pragma once

#include "common/fd.h"
#include "transport/link.h"
#include "transport/op_state.h"
#include "transport/shm/segment.h"
#include "transport/shm/setup.h"
#include "transport/shm/shm_link.h"
#include "transport/tcp/dial.h"
#include "transport/tcp/tcp_link.h"
#include "transport/transport.h"

#include <chorus/error.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace chorus::transport {

class PeerTransport final : public Transport {
 public:
  // How a wait polls before it sleeps in epoll_wait: for `duration`, giving the core away
  // (sched_yield) between polls when `yield` (this host runs more ranks than it has cores).
  struct Spin {
    std::chrono::microseconds duration{0};
    bool yield = false;
  };
  PeerTransport(int rank, int size, Fd listener, std::vector<tcp::Connection> connections,
                Spin spin);
  ~PeerTransport() override;

  void beginOp(const OpDesc& op) override;
  void postSend(Request& r, int peer, const void* data, size_t bytes, uint32_t step) override;
  void postRecv(Request& r, int peer, void* data, size_t bytes, uint32_t step) override;
  bool reducesOnReceive(int peer) const override;
  void postRecvReduce(Request& r, int peer, void* dst, const void* mine, size_t bytes,
                      uint32_t step, CombineFn fn, size_t elementBytes) override;
  void wait(Request& r, Deadline deadline) override;
  void poll(Deadline deadline) override { progress(deadline); }
  void pollStuckOn(const Request& r, Deadline deadline) override;
  void allowSpinning(bool allowed) override { spinAllowed_ = allowed; }
  void interrupt() noexcept override;
  void abort(const Error& cause) noexcept override;
  void close() noexcept override;
  void attachRecorder(trace::Recorder* recorder) override { op_.recorder = recorder; }
  uint64_t communicatorId() const override { return communicatorId_; }
  uint64_t bytesSent() const override { return bytesSent_.load(std::memory_order_relaxed); }
  std::vector<int> failedPeers() const override;
  void setCommunicatorId(uint64_t id) { communicatorId_ = id; }
  std::string peerAddress(int peer) const override;
  const std::vector<std::string>& hosts() const override { return hosts_; }
  const char* pathTo(int peer) const override {
    return peer >= 0 && peer < size_ && data_[static_cast<size_t>(peer)]
               ? data_[static_cast<size_t>(peer)]->kind()
               : "tcp";
  }

  void setHosts(std::vector<std::string> hosts) { hosts_ = std::move(hosts); }
  // Moves the data of these peers to shared memory; self holds this rank's outgoing rings.
  void attachSharedMemory(shm::Segment self, std::vector<shm::PeerLink> links);

 private:
  // epoll keys of the interrupt eventfd and the listener; a peer's socket has its rank.
  static constexpr uint64_t kWakeKey = ~uint64_t{0};
  static constexpr uint64_t kListenerKey = ~uint64_t{0} - 1;

  void progress(Deadline deadline);
  // Moves data on the shared-memory links; true when anything moved or finished.
  bool pumpShared();
  bool sharedBusy() const;
  void sendAbortFrames(const Error& cause) noexcept;
  // Records `peer` as failed when `e` says it is lost or gone (not when it sent its abort).
  void notePeerError(int peer, const Error& e) noexcept;
  void notePeerFailed(int peer) noexcept;
  std::string timeoutMessage(const Request& r) const;
  std::string waitingText(const Request& r) const;
  void pollStuck(const Request& r, Deadline deadline);
  // The link that carries data to peer; throws when there is none (any more).
  Link& link(int peer);

  int rank_;
  int size_;
  Spin spin_;
  Fd epoll_;
  Fd wake_;  // eventfd that interrupt() writes
  Fd listener_;
  OpState op_;
  // Indexed by peer rank (null for this rank): every peer's socket, and the link that carries
  // its data (the socket, or shared-memory rings with the socket for control).
  std::vector<std::unique_ptr<tcp::TcpLink>> sockets_;
  std::vector<std::unique_ptr<shm::ShmLink>> rings_;
  std::vector<Link*> data_;
  std::vector<shm::ShmLink*> shared_;  // the peers on shared memory, in rank order
  std::atomic<bool> interrupted_{false};
  std::atomic<uint64_t> bytesSent_{0};  // written by the driving thread only
  bool abortSent_ = false;
  std::vector<std::string> hosts_;
  shm::Segment shmSelf_;
  bool onlyShared_ = false;  // every peer is on shared memory
  bool spinAllowed_ = true;
  // Whether this progress call may poll: false while a wait's request streams in over TCP and
  // its end is further than kFarSpins spins away (wait_policy.h).
  bool spinNow_ = true;
  static constexpr int kFarSpins = 1;
  // The rate of the last paced wait per peer and direction (index 2 * peer + sending), for the
  // next one (wait_policy.h, kCarriedRateFor).
  struct LinkRate {
    double bytesPerNs = 0;
    std::chrono::steady_clock::time_point at{};
  };
  std::vector<LinkRate> rates_;
  uint64_t communicatorId_ = 0;
  // Per peer: set once this transport saw it fail (failedPeers; read from any thread).
  std::unique_ptr<std::atomic<bool>[]> peerFailed_;
};

}  // namespace chorus::transport
