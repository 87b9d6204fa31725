// A peer over TCP: one non-blocking socket carrying framed messages, driven by the transport's
// epoll loop. It also carries the control frames (abort, goodbye, wake-up) of a peer whose data
// travels through shared memory, and its end tells that the peer's process is gone.
#pragma once

#include "common/fd.h"
#include "transport/frame.h"
#include "transport/link.h"
#include "transport/op_state.h"
#include "transport/tcp/zero_copy.h"

#include <chorus/error.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace chorus::transport::tcp {

// The plain link: frames written as they are, by one of two data paths (gathered copies, or
// MSG_ZEROCOPY for large payloads) and, for control frames, by direct writes. The encrypted link
// (SealedTcpLink, sealed_tcp_link.h) replaces the write paths, the reads and the control writes.
class TcpLink : public Link {
 public:
  // epollFd: the transport's; the socket is registered with the peer's rank as its key.
  // zeroCopy: Options::tcp's MSG_ZEROCOPY settings (the encrypted link passes them off).
  TcpLink(int peer, Fd fd, std::string address, OpState& op, int epollFd,
          ZeroCopySettings zeroCopy);

  const char* kind() const override { return "tcp"; }
  void postSend(Request& r) override;
  void postRecv(Request& r) override;
  bool holdsSend(const Request* r) const override;
  void clear() noexcept override;
  bool peerLeft() const override { return in_ == Inbound::kGone; }
  void throwPeerLeft() override { gone(); }
  void wakePeer() noexcept override;
  void throwPeerAbort() override;

  const std::string& address() const { return address_; }
  // The socket is still there (until close), though the peer may have left.
  bool connected() const { return fd_.valid(); }
  // Checks a frame parked before the collective began against it.
  void onBeginOp();
  // Handles epoll events on the socket.
  void onEvents(uint32_t events);
  // Sends this rank's abort frame (header + text) after completing a half-written frame.
  void sendAbort(const uint8_t* header, const std::string& text) noexcept;
  // Forgets pending requests and half-closes, so the peer sees the abort.
  void shutDown() noexcept;
  // Says goodbye (when nothing is left to send) and half-closes.
  void sayGoodbye(const uint8_t* header) noexcept;
  // Reads what is left and closes the socket.
  void drainAndClose() noexcept;

 protected:
  enum class Inbound : uint8_t { kHeader, kPayload, kAbortText, kGone };
  // Largest frame (header + payload) read with a single recv into the stage.
  static constexpr size_t kStageBytes = 4096 + kFrameHeaderBytes;
  // Most frames one sendmsg carries.
  static constexpr int kGatherFrames = 8;
  // Zeros written at a time when padFrame completes a frame.
  static constexpr size_t kPadChunk = 65536;

  // What the encrypted link replaces (sealed_tcp_link.h).
  // Writes the queued sends until the socket is full or the queue empty.
  virtual void onWritable();
  // Moves stream bytes into dst[got, want): staged bytes first, else one recv (through the
  // stage, reading ahead, when fewer than kStageBytes are wanted; straight into dst otherwise,
  // with what follows read ahead into the stage). False when nothing is available now or the
  // peer is gone. `drained`: set once a recv comes back short; no recv is tried after that.
  virtual bool readSome(uint8_t* dst, size_t want, size_t& got, bool& drained);
  // Bytes read from the socket that wait in this process (epoll does not announce them).
  virtual bool buffered() const { return stageAt_ < stageEnd_; }
  // Control frames (header + optional text). Abort: one attempt, never waiting; goodbye: the
  // same, true when the link may half-close after it; wake-up: whole, waiting up to a second.
  virtual void writeAbort(const uint8_t* header, const std::string& text) noexcept;
  virtual bool writeGoodbye(const uint8_t* header) noexcept;
  virtual void writeWake(const uint8_t* header) noexcept;
  // Completes a half-written frame with zeros before an abort; false on failure.
  virtual bool padFrame() noexcept;
  // Salvaging the peer's abort message behind queued data: whether the stream can still be
  // read, and one read of up to `want` bytes to discard (k: how many; false: none now).
  virtual bool salvageable() const { return true; }
  virtual bool discard(uint8_t* sink, size_t want, size_t& k);

  void onReadable();
  // The data paths of the plain link. writeGathered writes the head send's rest and the copied
  // sends queued behind it with one sendmsg; writeZeroCopy writes the head's header, or its
  // payload with MSG_ZEROCOPY. Both return false when the socket took less than offered
  // (writeBlocked_ is then set).
  bool writeGathered();
  bool writeZeroCopy(Request& r);
  // The head send's payload is all written: done now, or held until the kernel releases it.
  void finishSend(Request& r);
  // Reads the zero-copy notifications and completes the held sends they release.
  void reapZeroCopy();
  void onHeader(const FrameHeader& h);
  void onAbortText();
  void startPayload();
  void checkParked();
  void onEof();
  void updateEvents();
  void encodeSendHeader();
  void encodeHeader(const Request& r, uint8_t* out) const;
  [[noreturn]] void lost(const std::string& why);
  void salvageAbort() noexcept;
  [[noreturn]] void gone();

  int peer_;
  Fd fd_;
  std::string address_;
  OpState& op_;
  int epoll_;
  uint32_t events_ = 0;  // epoll mask currently registered
  bool halfClosed_ = false;
  bool sawBye_ = false;
  // The peer is on a loopback address: data arrives at memory speed and a window update costs
  // little, so reads go on after a short one and take no read-ahead (TcpLink::readSome), and
  // writes go on after a short one, a frame at a time (TcpLink::writeGathered).
  bool loopback_ = false;
  // Outbound: FIFO of sends; the head's header is encoded in sendHeader_.
  Request* sendHead_ = nullptr;
  Request* sendTail_ = nullptr;
  uint8_t sendHeader_[kFrameHeaderBytes] = {};
  uint8_t gatherHeaders_[kGatherFrames][kFrameHeaderBytes] = {};  // [0] unused: the head's is above
  size_t headerSent_ = 0;
  size_t frameLeft_ = 0;  // bytes of a partly written frame still owed to the stream
  bool writeBlocked_ = false;
  // Inbound: FIFO of receives and the state of the byte stream.
  Request* recvHead_ = nullptr;
  Request* recvTail_ = nullptr;
  Inbound in_ = Inbound::kHeader;
  uint8_t recvHeader_[kFrameHeaderBytes] = {};
  size_t headerGot_ = 0;
  // Bytes read from the socket ahead of the state machine: a small frame's header and payload
  // come in one recv and are handed out from here (stage_[stageAt_, stageEnd_)).
  uint8_t stage_[kStageBytes];
  size_t stageAt_ = 0;
  size_t stageEnd_ = 0;
  // Parked with no receive posted and still readable: stop polling the socket until a
  // receive is posted (set lazily, so a small message parked whole costs no epoll_ctl).
  bool muted_ = false;
  bool parked_ = false;  // a data header was read; its payload waits for a posted receive
  FrameHeader parkedHeader_;
  std::string abortText_;
  size_t abortGot_ = 0;
  uint64_t abortSeq_ = 0;      // collective the peer was in when it aborted
  bool abortedLater_ = false;  // it aborted in a later collective than this rank's
  bool abortRead_ = false;     // its abort message was read whole: it said why it failed
  bool salvaging_ = false;
  std::unique_ptr<Error> salvaged_;
  ZeroCopy zeroCopy_;
  bool headZeroCopied_ = false;  // part of the head send went out with MSG_ZEROCOPY
  uint32_t headLastZeroCopy_ = 0;
};

}  // namespace chorus::transport::tcp
