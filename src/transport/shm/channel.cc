#include "transport/shm/channel.h"

#include "common/errno_text.h"
#include "transport/frame.h"
#include "transport/mismatch.h"
#include "transport/request_queue.h"

#include <chorus/error.hpp>

#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace chorus::transport::shm {
namespace {

// Payload is published in pieces of this size so that the reader copies out while the writer
// still copies in.
constexpr size_t kPublishBytes = 64 * 1024;

size_t padding(size_t bytes) { return (kSlotBytes - bytes % kSlotBytes) % kSlotBytes; }

// In the last word of a slot: "nothing here, continue at the ring's start".
constexpr uint64_t kRewind = 0x444e495745524843;  // "CHREWIND"
constexpr size_t kMarkAt = kFrameHeaderBytes + sizeof(uint64_t);

uint64_t nextLap(uint64_t pos, size_t cap) { return (pos / cap + 1) * cap; }
// How far into the ring the writer may get before it goes back to the start when it can.
constexpr size_t kRewindAfter = 16 * 1024;

}  // namespace

void Channel::postSend(Request& r) { pushRequest(sendHead_, sendTail_, &r); }
void Channel::postRecv(Request& r) { pushRequest(recvHead_, recvTail_, &r); }

bool Channel::inboundPending() const {
  return c_.in->head.load(std::memory_order_acquire) != tail_;
}

bool Channel::holdsSend(const Request* r) const {
  for (const Request* q = sendHead_; q; q = q->next) {
    if (q == r) return true;
  }
  for (const Request* q = ackHead_; q; q = q->next) {
    if (q == r) return true;
  }
  return false;
}

void Channel::clear() {
  sendHead_ = sendTail_ = nullptr;
  ackHead_ = ackTail_ = nullptr;
  recvHead_ = recvTail_ = nullptr;
}

bool Channel::pump(const OpDesc& current, bool& wakePeer) {
  bool moved = false;
  if (sendHead_) moved |= pumpSends(current);
  if (ackHead_) moved |= pumpAcks();
  if (recvHead_) moved |= pumpRecvs(current);
  if (moved) {
    // Pairs with the fence of a rank that announces it sleeps and then looks at the rings once
    // more: either it sees what was just published, or this sees its flag.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    auto& flag = c_.peerHeader->sleeping;
    if (flag.load(std::memory_order_relaxed) != 0 && flag.exchange(0) != 0) wakePeer = true;
  }
  return moved;
}

bool Channel::pumpSends(const OpDesc& current) {
  bool moved = false;
  const size_t cap = c_.ringBytes;
  auto space = [&] { return cap - static_cast<size_t>(head_ - tailSeen_); };
  auto refresh = [&] {
    tailSeen_ = c_.out->tail.load(std::memory_order_acquire);
    ringAcquired(c_.syncKeys, RingEnd::kOut, RingWord::kTail);
  };
  if (!outWarm_) {
    warmRing(*c_.out, cap);
    outWarm_ = true;
  }
  while (sendHead_) {
    Request& r = *sendHead_;
    if (!slotWritten_) {
      if (space() < kSlotBytes) refresh();
      if (space() < kSlotBytes) break;
      if (head_ % cap >= kRewindAfter && (refresh(), head_ == tailSeen_)) {
        // The reader has taken everything: start again at the ring's beginning, so that a
        // stream of small messages keeps reusing the same few warm pages instead of walking
        // the whole ring (here a page left untouched for a while costs a fault again).
        uint8_t* mark = c_.outData + head_ % cap;
        std::memcpy(mark + kMarkAt, &kRewind, sizeof(kRewind));
        head_ = nextLap(head_, cap);
        moved = true;
      }
      const bool single = c_.singleCopyBytes > 0 && r.bytes >= c_.singleCopyBytes;
      uint8_t* slot = c_.outData + head_ % cap;
      FrameHeader h;
      h.kind = FrameKind::kData;
      h.op = current;
      h.step = r.step;
      h.bytes = r.bytes;
      encodeFrame(h, slot);
      uint64_t source = single ? reinterpret_cast<uintptr_t>(r.data) : 0;
      std::memcpy(slot + kFrameHeaderBytes, &source, sizeof(source));
      const uint64_t noMark = 0;  // the slot's last word may hold old payload bytes
      std::memcpy(slot + kMarkAt, &noMark, sizeof(noMark));
      head_ += kSlotBytes;
      moved = true;
      if (single) {
        popRequest(sendHead_, sendTail_);
        r.moved = ++singleSent_;  // done when the peer's acked count reaches this
        pushRequest(ackHead_, ackTail_, &r);
        continue;
      }
      slotWritten_ = true;
      padLeft_ = padding(r.bytes);
    }
    while (r.moved < r.bytes) {
      if (space() == 0) refresh();
      size_t room = space();
      if (room == 0) break;
      size_t at = head_ % cap;
      size_t n = std::min({room, r.bytes - r.moved, cap - at, kPublishBytes});
      std::memcpy(c_.outData + at, r.data + r.moved, n);
      r.moved += n;
      head_ += n;
      moved = true;
      ringReleased(c_.syncKeys, RingEnd::kOut, RingWord::kHead);
      c_.out->head.store(head_, std::memory_order_release);
    }
    if (r.moved < r.bytes) break;
    if (padLeft_ > 0) {
      if (space() < padLeft_) refresh();
      if (space() < padLeft_) break;
      head_ += padLeft_;
      padLeft_ = 0;
    }
    popRequest(sendHead_, sendTail_);
    slotWritten_ = false;
    r.state = Request::State::kDone;
    op_.sent(c_.peer, r.bytes);
    moved = true;
  }
  if (moved) {
    ringReleased(c_.syncKeys, RingEnd::kOut, RingWord::kHead);
    c_.out->head.store(head_, std::memory_order_release);
  }
  return moved;
}

bool Channel::pumpAcks() {
  uint64_t acked = c_.out->acked.load(std::memory_order_acquire);
  ringAcquired(c_.syncKeys, RingEnd::kOut, RingWord::kAcked);
  bool moved = false;
  while (ackHead_ && ackHead_->moved <= acked) {
    Request* r = popRequest(ackHead_, ackTail_);
    r->moved = r->bytes;
    r->state = Request::State::kDone;
    op_.sent(c_.peer, r->bytes);
    moved = true;
  }
  return moved;
}

void Channel::checkFrame(const uint8_t* slot, const Request& r, const OpDesc& current,
                         uint64_t* source) {
  std::string why;
  auto h = decodeFrame(slot, &why);
  if (!h || h->kind != FrameKind::kData) {
    throw Error(ErrorCode::kPeerFailure, "protocol violation in shared memory from rank " +
                                             std::to_string(c_.peer) + ": " +
                                             (h ? "not a data frame" : why));
  }
  if (auto mismatch = findMismatch(c_.peer, *h, current, &r)) throw *mismatch;
  std::memcpy(source, slot + kFrameHeaderBytes, sizeof(*source));
}

void Channel::deliver(Request& r, const uint8_t* from, size_t n) {
  if (r.combine) {
    r.combine(r.data + r.moved, r.mine + r.moved, from, n / r.elementBytes);
  } else {
    std::memcpy(r.data + r.moved, from, n);
  }
  r.moved += n;
}

void Channel::readSingleCopy(Request& r, uint64_t source) {
  // A payload to combine goes through a small buffer, in pieces that stay in the cache.
  constexpr size_t kBounceBytes = 64 * 1024;
  if (r.combine && !bounce_) bounce_ = std::make_unique<uint8_t[]>(kBounceBytes);
  while (r.moved < r.bytes) {
    size_t want = r.bytes - r.moved;
    if (r.combine) want = std::min(want, kBounceBytes);
    iovec local{r.combine ? bounce_.get() : r.data + r.moved, want};
    iovec remote{reinterpret_cast<void*>(source + r.moved), want};
    ssize_t k = ::process_vm_readv(c_.peerPid, &local, 1, &remote, 1, 0);
    if (k > 0 && !r.combine) {
      r.moved += static_cast<size_t>(k);
      continue;
    }
    if (k == static_cast<ssize_t>(want)) {
      deliver(r, bounce_.get(), want);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    throw Error(ErrorCode::kPeerFailure,
                "single-copy read of " + std::to_string(r.bytes) + " bytes from rank " +
                    std::to_string(c_.peer) + " (pid " + std::to_string(c_.peerPid) +
                    ") failed: " + (k < 0 ? errnoText(errno) : "short read"));
  }
}

bool Channel::pumpRecvs(const OpDesc& current) {
  bool moved = false;
  const size_t cap = c_.ringBytes;
  auto avail = [&] { return static_cast<size_t>(headSeen_ - tail_); };
  auto refresh = [&] {
    headSeen_ = c_.in->head.load(std::memory_order_acquire);
    ringAcquired(c_.syncKeys, RingEnd::kIn, RingWord::kHead);
  };
  while (recvHead_) {
    Request& r = *recvHead_;
    if (!slotRead_) {
      if (avail() < kSlotBytes) refresh();
      if (avail() < kSlotBytes) break;
      uint64_t mark;
      std::memcpy(&mark, c_.inData + tail_ % cap + kMarkAt, sizeof(mark));
      if (mark == kRewind) {
        std::memset(c_.inData + tail_ % cap + kMarkAt, 0, sizeof(mark));
        tail_ = nextLap(tail_, cap);
        moved = true;
        continue;
      }
      uint64_t source = 0;
      checkFrame(c_.inData + tail_ % cap, r, current, &source);
      op_.arrived(c_.peer);
      tail_ += kSlotBytes;
      moved = true;
      if (source != 0) {
        readSingleCopy(r, source);
        ringReleased(c_.syncKeys, RingEnd::kIn, RingWord::kTail);
        c_.in->tail.store(tail_, std::memory_order_release);
        ringReleased(c_.syncKeys, RingEnd::kIn, RingWord::kAcked);
        c_.in->acked.store(++acksGiven_, std::memory_order_release);
        popRequest(recvHead_, recvTail_);
        r.state = Request::State::kDone;
        op_.received(c_.peer, r.bytes);
        continue;
      }
      slotRead_ = true;
      inPad_ = padding(r.bytes);
    }
    const size_t unit = r.combine ? r.elementBytes : 1;
    while (r.moved < r.bytes) {
      if (avail() < unit) refresh();
      size_t have = avail();
      if (have < unit) break;
      size_t at = tail_ % cap;
      size_t n = std::min({have, r.bytes - r.moved, cap - at, kPublishBytes});
      // Whole elements only: the writer publishes whole elements, so the rest comes next.
      if (r.combine) n -= n % r.elementBytes;
      if (n == 0) break;
      deliver(r, c_.inData + at, n);
      tail_ += n;
      moved = true;
      ringReleased(c_.syncKeys, RingEnd::kIn, RingWord::kTail);
      c_.in->tail.store(tail_, std::memory_order_release);
    }
    if (r.moved < r.bytes) break;
    if (inPad_ > 0) {
      if (avail() < inPad_) refresh();
      if (avail() < inPad_) break;
      tail_ += inPad_;
      inPad_ = 0;
    }
    popRequest(recvHead_, recvTail_);
    slotRead_ = false;
    r.state = Request::State::kDone;
    op_.received(c_.peer, r.bytes);
    moved = true;
  }
  if (moved) {
    ringReleased(c_.syncKeys, RingEnd::kIn, RingWord::kTail);
    c_.in->tail.store(tail_, std::memory_order_release);
  }
  return moved;
}

}  // namespace chorus::transport::shm
