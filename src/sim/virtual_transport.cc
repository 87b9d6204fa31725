// The message path of the virtual world: posting, matching and completing sends and receives
// (with the network model's times), and the reports of what is waiting on what.
#include "sim/virtual_transport.h"

#include "sim/world_impl.h"
#include "transport/request_queue.h"

#include <chorus/error.hpp>

#include <algorithm>
#include <cstring>
#include <string>

namespace chorus::sim {

using transport::Request;

void VirtualTransport::beginOp(const OpDesc& op) {
  k_->op = op;
  k_->opBegun = true;
}

void VirtualTransport::postSend(Request& r, int peer, const void* data, size_t bytes,
                                uint32_t step) {
  w_->postSend(*k_, r, peer, data, bytes, step);
}

void VirtualTransport::postRecv(Request& r, int peer, void* data, size_t bytes, uint32_t step) {
  w_->postRecv(*k_, r, peer, data, bytes, step);
}

void VirtualTransport::wait(Request& r, Deadline) { w_->wait(*k_, r); }

void VirtualTransport::poll(Deadline) { w_->poll(*k_); }

const char* VirtualTransport::pathTo(int peer) const {
  return w_->hostIndex.at(static_cast<size_t>(peer)) ==
                 w_->hostIndex[static_cast<size_t>(k_->index)]
             ? "shm"
             : "tcp";
}

const std::vector<std::string>& VirtualTransport::hosts() const { return w_->hostIds; }

void VirtualWorld::Impl::completeAt(Request& r, Rank& owner, Time t) {
  const Time now = current ? current->clock : 0;
  if (t > now) {
    push(t, &r, owner.index);
    return;
  }
  r.state = Request::State::kDone;
  --owner.pending;
  if (&owner != current && (owner.blockedOn == &r || owner.blockedOn == &pollMarker)) {
    owner.blockedOn = nullptr;
    push(now, nullptr, owner.index);
  }
}

void VirtualWorld::Impl::match(Rank& receiver, Message* m, Request& recv, int src, Time at) {
  if (m->step != recv.step || m->bytes != recv.bytes ||
      (m->opBegun && receiver.opBegun && !m->op.sameCall(receiver.op))) {
    std::string why = "rank " + std::to_string(receiver.index) + " receives (step " +
                      std::to_string(recv.step) + ", " + std::to_string(recv.bytes) +
                      " bytes) from rank " + std::to_string(src) +
                      ", whose next message is (step " + std::to_string(m->step) + ", " +
                      std::to_string(m->bytes) + " bytes)";
    if (m->opBegun && receiver.opBegun && !m->op.sameCall(receiver.op)) {
      why += "; calls differ: " + receiver.op.describe() + " #" + std::to_string(receiver.op.seq) +
             " here, " + m->op.describe() + " #" + std::to_string(m->op.seq) + " there";
    }
    pool.put(m);
    throw Error(ErrorCode::kMismatch, why);
  }
  if (!dry && m->bytes > 0) std::memcpy(recv.data, m->data, m->bytes);
  recv.moved = m->bytes;
  if (m->send != nullptr) {
    m->send->moved = m->bytes;
    completeAt(*m->send, ranks[static_cast<size_t>(src)], std::max(at, m->arrival));
  }
  completeAt(recv, receiver, std::max(at, m->arrival));
  pool.put(m);
}

void VirtualWorld::Impl::postSend(Rank& k, Request& r, int peer, const void* data, size_t bytes,
                                  uint32_t step) {
  if (unwinding) return;
  checkPeer(k, peer, "send");
  if (overheadPs != 0) k.clock += overheadPs;
  syncTime(k);
  r.start(peer, step, data, bytes);
  ++k.pending;
  ++messages;

  Message* m = pool.get();
  m->data = static_cast<const uint8_t*>(data);
  m->bytes = bytes;
  m->step = step;
  m->op = k.op;
  m->opBegun = k.opBegun;
  const Time t = k.clock;
  Time leaves = t, arrives = t;
  if (timed) {
    const int hs = hostIndex[static_cast<size_t>(k.index)];
    const int hd = hostIndex[static_cast<size_t>(peer)];
    if (hs == hd) {
      const Time xfer = static_cast<Time>(static_cast<double>(bytes) * shmBetaPs);
      const Time start = std::max(t, k.shmFree);
      k.shmFree = start + xfer;
      leaves = start + xfer;
      arrives = start + shmAlphaPs + xfer;
    } else {
      const Time xfer = static_cast<Time>(static_cast<double>(bytes) * netBetaPs);
      Time& egress = egressFree[static_cast<size_t>(hs)];
      Time& ingress = ingressFree[static_cast<size_t>(hd)];
      const Time start = std::max(t, egress);
      egress = start + xfer;
      leaves = start + xfer;
      const Time in = std::max(start + netAlphaPs, ingress);
      ingress = in + xfer;
      arrives = in + xfer;
      if (!coreFree.empty() && bytes > 0) {
        // The stack's work takes the earliest free shared core; the wire cannot run ahead of it.
        Time& core = *std::min_element(coreFree.begin(), coreFree.end());
        const Time begin = std::max(start, core);
        core = begin + static_cast<Time>(static_cast<double>(bytes) * coreBetaPs);
        leaves = std::max(leaves, core);
        arrives = std::max(arrives, core + netAlphaPs);
      }
    }
  }
  m->arrival = arrives;
  if (dry) {
    m->send = nullptr;
    completeAt(r, k, leaves);  // eager: done once the bytes have left
  } else {
    m->send = &r;  // rendezvous: done when received (and not before the bytes arrived)
  }

  Channel* ch = k.sendPeer == peer ? k.sendChan : nullptr;
  if (ch == nullptr) {
    ch = &channel(k.index, peer);
    k.sendPeer = peer;
    k.sendChan = ch;
  }
  if (ch->recvHead != nullptr) {
    Request* recv = transport::popRequest(ch->recvHead, ch->recvTail);
    match(ranks[static_cast<size_t>(peer)], m, *recv, k.index, t);
  } else {
    if (ch->tail) {
      ch->tail->next = m;
    } else {
      ch->head = m;
    }
    ch->tail = m;
    ++queued;
  }
}

void VirtualWorld::Impl::postRecv(Rank& k, Request& r, int peer, void* data, size_t bytes,
                                  uint32_t step) {
  if (unwinding) return;
  checkPeer(k, peer, "receive");
  syncTime(k);
  r.start(peer, step, data, bytes);
  ++k.pending;
  Channel* ch = k.recvPeer == peer ? k.recvChan : nullptr;
  if (ch == nullptr) {
    ch = &channel(peer, k.index);
    k.recvPeer = peer;
    k.recvChan = ch;
  }
  if (ch->head != nullptr) {
    Message* m = ch->head;
    ch->head = m->next;
    if (ch->head == nullptr) ch->tail = nullptr;
    --queued;
    r.next = nullptr;
    match(k, m, r, peer, k.clock);
  } else {
    transport::pushRequest(ch->recvHead, ch->recvTail, &r);
  }
}

void VirtualWorld::Impl::wait(Rank& k, Request& r) {
  if (unwinding || r.state != Request::State::kPending) return;
  k.blockedOn = &r;
  suspend(k);
}

void VirtualWorld::Impl::poll(Rank& k) {
  if (unwinding) return;
  k.blockedOn = &pollMarker;
  suspend(k);
}

std::string VirtualWorld::Impl::describeWait(const Rank& k) {
  std::string s = "rank " + std::to_string(k.index);
  if (k.blockedOn == &pollMarker) {
    return s + " polls with " + std::to_string(k.pending) + " request(s) pending";
  }
  if (k.blockedOn == nullptr) return s + " is not blocked";
  const Request& r = *k.blockedOn;
  bool isRecv = false;
  Channel& in = channel(r.peer, k.index);
  for (Request* q = in.recvHead; q != nullptr; q = q->next) isRecv = isRecv || q == &r;
  const std::string what =
      "(step " + std::to_string(r.step) + ", " + std::to_string(r.bytes) + " bytes)";
  if (isRecv) return s + " waits for a message from rank " + std::to_string(r.peer) + " " + what;
  return s + " waits for rank " + std::to_string(r.peer) + " to receive its message " + what;
}

std::string VirtualWorld::Impl::unreceivedReport(size_t limit) {
  std::string s;
  size_t lines = 0, more = 0;
  for (Channel& c : channels.all()) {
    for (Message* m = c.head; m != nullptr; m = m->next) {
      if (lines < limit) {
        s += "\n  rank " + std::to_string(c.src) + " sent rank " + std::to_string(c.dst) +
             " a message (step " + std::to_string(m->step) + ", " + std::to_string(m->bytes) +
             " bytes) that it never received";
        ++lines;
      } else {
        ++more;
      }
    }
  }
  if (more) s += "\n  ... and " + std::to_string(more) + " more unreceived message(s)";
  return s;
}

}  // namespace chorus::sim
