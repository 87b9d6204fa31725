// The transport of one communicator: one TCP connection per peer, non-blocking sockets, epoll
// progress driven by the thread that waits (no transport thread, so no handoff between threads
// per message).
// Peers on the same host exchange data through shared-memory rings instead (transport/shm); their
// TCP connection stays for control: abort and goodbye messages, wake-ups of a sleeping rank, and
// the end-of-file the kernel delivers when the peer's process dies.
#pragma once

#include "common/fd.h"
#include "transport/frame.h"
#include "transport/shm/channel.h"
#include "transport/shm/segment.h"
#include "transport/shm/setup.h"
#include "transport/tcp/dial.h"
#include "transport/transport.h"

#include <chorus/error.hpp>

#include <array>
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
  void wait(Request& r, Deadline deadline) override;
  void poll(Deadline deadline) override { progress(deadline); }
  void pollStuckOn(const Request& r, Deadline deadline) override;
  void allowSpinning(bool allowed) override { spinAllowed_ = allowed; }
  void interrupt() noexcept override;
  void abort(const Error& cause) noexcept override;
  void close() noexcept override;
  std::string peerAddress(int peer) const override;
  const std::vector<std::string>& hosts() const override { return hosts_; }
  const char* pathTo(int peer) const override {
    return peer >= 0 && peer < size_ && links_[static_cast<size_t>(peer)].shm ? "shm" : "tcp";
  }

  void setHosts(std::vector<std::string> hosts) { hosts_ = std::move(hosts); }
  // Moves the data of these peers to shared memory; self holds this rank's outgoing rings.
  void attachSharedMemory(shm::Segment self, std::vector<shm::PeerLink> links);

 private:
  enum class Inbound : uint8_t { kHeader, kPayload, kAbortText, kGone };
  // epoll keys of the interrupt eventfd and the listener; a peer's socket has its rank.
  static constexpr uint64_t kWakeKey = ~uint64_t{0};
  static constexpr uint64_t kListenerKey = ~uint64_t{0} - 1;

  // Largest frame (header + payload) read with a single recv into a link's stage.
  static constexpr size_t kStageBytes = 4096 + kFrameHeaderBytes;
  struct Link {
    int peer = -1;
    Fd fd;
    std::string address;
    uint32_t events = 0;  // epoll mask currently registered
    bool halfClosed = false;
    bool sawBye = false;
    // Outbound: FIFO of sends; the head's header is encoded in sendHeader.
    Request* sendHead = nullptr;
    Request* sendTail = nullptr;
    uint8_t sendHeader[kFrameHeaderBytes] = {};
    size_t headerSent = 0;
    size_t frameLeft = 0;  // bytes of a partly written frame still owed to the stream
    bool writeBlocked = false;
    // Inbound: FIFO of receives and the state of the byte stream.
    Request* recvHead = nullptr;
    Request* recvTail = nullptr;
    Inbound in = Inbound::kHeader;
    uint8_t recvHeader[kFrameHeaderBytes] = {};
    size_t headerGot = 0;
    // Bytes read from the socket ahead of the state machine: a small frame's header and payload
    // come in one recv and are handed out from here (stage[stageAt, stageEnd)).
    uint8_t stage[kStageBytes];
    size_t stageAt = 0;
    size_t stageEnd = 0;
    // Parked with no receive posted and still readable: stop polling the socket until a
    // receive is posted (set lazily, so a small message parked whole costs no epoll_ctl).
    bool muted = false;
    bool parked = false;  // a data header was read; its payload waits for a posted receive
    FrameHeader parkedHeader;
    std::string abortText;
    size_t abortGot = 0;
    uint64_t abortSeq = 0;      // collective the peer was in when it aborted
    bool abortedLater = false;  // it aborted in a later collective than this rank's
    bool abortRead = false;     // its abort message was read whole: it said why it failed
    // Data path when the peer shares this host; the socket then carries control frames only.
    std::unique_ptr<shm::Channel> shm;
    shm::Segment shmSegment;
  };

  void progress(Deadline deadline);
  // Moves data on the shared-memory links; true when anything moved or finished.
  bool pumpShared();
  bool sharedBusy() const;
  bool pumpLink(Link& l);
  void sendWake(Link& l) noexcept;
  [[noreturn]] void sharedPeerAborted(Link& l);
  void onReadable(Link& l);
  void onWritable(Link& l);
  void onHeader(Link& l, const FrameHeader& h);
  void onAbortText(Link& l);
  // Reads into dst[got..want); false when nothing more is readable now (or the peer left).
  // Moves stream bytes into dst[got, want): staged bytes first, else one recv (through the
  // stage, reading ahead, when fewer than kStageBytes are wanted; straight into dst otherwise).
  // False when nothing is available now or the peer is gone.
  bool readSome(Link& l, uint8_t* dst, size_t want, size_t& got);
  void startPayload(Link& l);
  void checkParked(Link& l);
  void onEof(Link& l);
  void updateEvents(Link& l);
  void encodeSendHeader(Link& l);
  [[noreturn]] void lost(Link& l, const std::string& why);
  void salvageAbort(Link& l) noexcept;
  void sendAbortFrames(const Error& cause) noexcept;
  bool padFrame(Link& l) noexcept;
  std::string timeoutMessage(const Request& r) const;
  std::string waitingText(const Request& r) const;
  [[noreturn]] void gone(Link& l);
  Link& link(int peer);
  void drainAndClose(Link& l) noexcept;

  int rank_;
  int size_;
  Spin spin_;
  Fd epoll_;
  Fd wake_;  // eventfd that interrupt() writes
  Fd listener_;
  std::vector<Link> links_;  // indexed by peer rank; links_[rank_] unused
  OpDesc current_;
  bool inOp_ = false;
  bool broken_ = false;
  std::atomic<bool> interrupted_{false};
  bool salvaging_ = false;
  bool abortSent_ = false;
  // An abort from a peer already past the current collective: that peer sent everything it owed
  // for this one, so the current collective may still finish; the next one fails with this.
  std::unique_ptr<Error> deferred_;
  // Recent calls, to describe a late frame from a peer in mismatch messages.
  std::array<OpDesc, 16> history_{};
  int abortFrom_ = -1;  // peer whose abort message was read last
  std::unique_ptr<Error> salvaged_;
  std::vector<std::string> hosts_;
  shm::Segment shmSelf_;
  std::vector<int> sharedPeers_;
  bool onlyShared_ = false;  // every peer is on shared memory
  bool spinAllowed_ = true;
};

}  // namespace chorus::transport
