// Messages to and from one peer on this host through two single-producer single-consumer rings:
// the outgoing ring is made by this rank when it first sends to the peer, the incoming one by the
// peer (each published in its writer's segment, ring_memory.h). Every frame
// starts on a cache line with a 64-byte slot (the wire frame header plus, for a single-copy
// message, the sender's buffer address); an inline payload follows, padded to a cache line.
// Large messages go single-copy when the kernel allows it: the receiver reads them straight from
// the sender's buffer (process_vm_readv) and acknowledges through the ring's `acked` counter.
#pragma once

#include "common/op_desc.h"
#include "transport/op_state.h"
#include "transport/shm/ring_memory.h"
#include "transport/shm/segment.h"
#include "transport/transport.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace chorus::transport::shm {

inline constexpr size_t kSlotBytes = 64;

struct ChannelConfig {
  int rank = -1;
  int peer = -1;
  int peerPid = 0;
  std::array<uint8_t, 16> job{};
  RingEntry* outEntry = nullptr;  // in this rank's segment: where the ring to peer is published
  RingEntry* inEntry = nullptr;   // in the peer's segment: where its ring to this rank appears
  size_t ringBytes = 0;           // both rings, a multiple of kSlotBytes
  SegmentHeader* peerHeader = nullptr;
  // Sends of at least this many bytes go single-copy (the peer said it can read this process's
  // memory); 0: never.
  size_t singleCopyBytes = 0;
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
  // frame that is not the one awaited, Error(kPeerFailure) when a single-copy read fails or the
  // peer's ring cannot be mapped, Error(kSystem) when this rank cannot make its own ring.
  bool pump(const OpDesc& current, bool& wakePeer);

  bool sending() const { return sendHead_ != nullptr || ackHead_ != nullptr; }
  bool receiving() const { return recvHead_ != nullptr; }
  bool holdsSend(const Request* r) const;
  uint64_t peerAbortedAt() const {
    return c_.peerHeader->abortedAt.load(std::memory_order_acquire);
  }
  // Unread bytes from the peer (or a ring from it not mapped yet).
  bool inboundPending() const;
  // Whether the ring to the peer, and the one from it, exist here (for tests and measurements).
  bool hasOutRing() const { return out_ != nullptr; }
  bool hasInRing() const { return in_ != nullptr; }
  // Forgets every request (after an abort); ring contents stay as they are.
  void clear();

 private:
  bool pumpSends(const OpDesc& current);
  bool pumpAcks();
  bool pumpRecvs(const OpDesc& current);
  // The ring to the peer, made and published on first use.
  void makeOutRing();
  // Maps the peer's ring to this rank once it is published; false while it is not.
  bool mapInRing();
  // Moves n payload bytes of r from the incoming ring (at) into its buffer: copied, or combined.
  void deliver(Request& r, const uint8_t* from, size_t n);
  void readSingleCopy(Request& r, uint64_t source);
  void checkFrame(const uint8_t* slot, const Request& r, const OpDesc& current, uint64_t* source);

  ChannelConfig c_;
  OpState& op_;
  RingMemory outRing_;
  RingMemory inRing_;
  RingControl* out_ = nullptr;  // this rank -> peer, null until the first send
  uint8_t* outData_ = nullptr;
  RingControl* in_ = nullptr;  // peer -> this rank, null until the peer published it
  uint8_t* inData_ = nullptr;
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
