// Messages to and from one peer on this host through two single-producer single-consumer rings:
// the outgoing ring lives in this rank's segment, the incoming one in the peer's. Every frame
// starts on a cache line with a 64-byte slot (the wire frame header plus, for a single-copy
// message, the sender's buffer address); an inline payload follows, padded to a cache line.
// Large messages go single-copy when the kernel allows it: the receiver reads them straight from
// the sender's buffer (process_vm_readv) and acknowledges through the ring's `acked` counter.
#pragma once

#include "common/op_desc.h"
#include "transport/op_state.h"
#include "transport/shm/segment.h"
#include "transport/shm/tsan_ring_sync.h"
#include "transport/transport.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace chorus::transport::shm {

inline constexpr size_t kSlotBytes = 64;

struct ChannelConfig {
  int peer = -1;
  int peerPid = 0;
  RingControl* out = nullptr;  // this rank -> peer
  uint8_t* outData = nullptr;
  RingControl* in = nullptr;  // peer -> this rank
  uint8_t* inData = nullptr;
  size_t ringBytes = 0;  // both rings, a multiple of kSlotBytes
  SegmentHeader* peerHeader = nullptr;
  // Sends of at least this many bytes go single-copy (the peer said it can read this process's
  // memory); 0: never.
  size_t singleCopyBytes = 0;
  // The two rings' identities for ThreadSanitizer (tsan_ring_sync.h); nothing in other builds.
  [[no_unique_address]] RingSyncKeys syncKeys;
};

class Channel {
 public:
  // op: where traffic is reported (OpState::sent, received, arrived).
  Channel(const ChannelConfig& c, OpState& op) : c_(c), op_(op) {}

  // r is filled in (peer, step, data, bytes) and pending.
  void postSend(Request& r);
  void postRecv(Request& r);

  // Moves what it can without blocking. Returns true when bytes moved or a request finished;
  // sets wakePeer when the peer sleeps and should look again. Throws Error(kMismatch) for a
  // frame that is not the one awaited and Error(kPeerFailure) when a single-copy read fails.
  // A receive posted with Request::combine set is combined with its `mine` into its buffer
  // straight from the ring (or, single-copy, through a small buffer) instead of copied.
  bool pump(const OpDesc& current, bool& wakePeer);

  bool sending() const { return sendHead_ != nullptr || ackHead_ != nullptr; }
  bool receiving() const { return recvHead_ != nullptr; }
  bool holdsSend(const Request* r) const;
  uint64_t peerAbortedAt() const {
    return c_.peerHeader->abortedAt.load(std::memory_order_acquire);
  }
  // Unread bytes from the peer.
  bool inboundPending() const;
  // Forgets every request (after an abort); ring contents stay as they are.
  void clear();

 private:
  bool pumpSends(const OpDesc& current);
  bool pumpAcks();
  bool pumpRecvs(const OpDesc& current);
  // Moves n payload bytes of r from `from` into its buffer: copied, or combined.
  void deliver(Request& r, const uint8_t* from, size_t n);
  void readSingleCopy(Request& r, uint64_t source);
  void checkFrame(const uint8_t* slot, const Request& r, const OpDesc& current, uint64_t* source);

  ChannelConfig c_;
  OpState& op_;
  bool outWarm_ = false;  // the outgoing ring's first pages are allocated (warmRing)
  // Single-copy payloads to combine are read into this first (allocated on first use).
  std::unique_ptr<uint8_t[]> bounce_;
  // Outbound: the head request's slot is written once, then its payload and padding.
  Request* sendHead_ = nullptr;
  Request* sendTail_ = nullptr;
  bool slotWritten_ = false;
  size_t padLeft_ = 0;
  uint64_t head_ = 0;        // writer's position (published to out->head)
  uint64_t tailSeen_ = 0;    // last tail read from out->tail
  uint64_t singleSent_ = 0;  // single-copy messages announced
  // Single-copy sends waiting for the peer's acknowledgement; Request::moved holds its number.
  Request* ackHead_ = nullptr;
  Request* ackTail_ = nullptr;
  // Inbound.
  Request* recvHead_ = nullptr;
  Request* recvTail_ = nullptr;
  bool slotRead_ = false;
  size_t inPad_ = 0;
  uint64_t tail_ = 0;      // reader's position (published to in->tail)
  uint64_t headSeen_ = 0;  // last head read from in->head
  uint64_t acksGiven_ = 0;
};

}  // namespace chorus::transport::shm
