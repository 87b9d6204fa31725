// Setup, posting and waiting.
#include "transport/peer_transport.h"

#include "common/errno_text.h"
#include "common/socket_io.h"
#include "transport/mismatch.h"
#include "transport/request_queue.h"

#include <chorus/error.hpp>

#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace chorus::transport {
namespace {

constexpr std::chrono::milliseconds kTimeoutGrace{1000};

}  // namespace

PeerTransport::PeerTransport(int rank, int size, Fd listener,
                             std::vector<tcp::Connection> connections, Spin spin)
    : rank_(rank), size_(size), spin_(spin), listener_(std::move(listener)), links_(size) {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!epoll_ || !wake_) throw Error(ErrorCode::kSystem, "epoll/eventfd: " + errnoText(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeKey;
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
  if (listener_) {
    setNonBlocking(listener_.get());
    ev.data.u64 = kListenerKey;
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &ev);
  }
  for (auto& c : connections) {
    Link& l = links_.at(static_cast<size_t>(c.peer));
    l.peer = c.peer;
    l.fd = std::move(c.fd);
    l.address = std::move(c.address);
    setNonBlocking(l.fd.get());
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = static_cast<uint64_t>(c.peer);
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, l.fd.get(), &ev) < 0) {
      throw Error(ErrorCode::kSystem, "epoll_ctl: " + errnoText(errno));
    }
    l.events = ev.events;
  }
}

PeerTransport::~PeerTransport() { close(); }

std::string PeerTransport::peerAddress(int peer) const {
  if (peer < 0 || peer >= size_) return "?";
  return links_[static_cast<size_t>(peer)].address;
}

PeerTransport::Link& PeerTransport::link(int peer) {
  if (peer < 0 || peer >= size_ || peer == rank_ || !links_[static_cast<size_t>(peer)].fd) {
    if (broken_) throw Error(ErrorCode::kAborted, "transport already aborted");
    throw Error(ErrorCode::kInternal, "no connection to rank " + std::to_string(peer));
  }
  return links_[static_cast<size_t>(peer)];
}

void PeerTransport::beginOp(const OpDesc& op) {
  if (deferred_) throw *deferred_;
  current_ = op;
  history_[op.seq % history_.size()] = op;
  inOp_ = true;
  for (auto& l : links_) {
    if (l.fd && l.parked) checkParked(l);
  }
}

void PeerTransport::postSend(Request& r, int peer, const void* data, size_t bytes, uint32_t step) {
  Link& l = link(peer);
  if (l.in == Inbound::kGone) gone(l);
  r.start(peer, step, data, bytes);
  if (l.shm) {
    l.shm->postSend(r);
    pumpLink(l);  // write at once, as for TCP
    return;
  }
  pushRequest(l.sendHead, l.sendTail, &r);
  if (l.sendHead == &r) {
    encodeSendHeader(l);
    onWritable(l);  // write at once: the common case needs no epoll round
  }
}

void PeerTransport::postRecv(Request& r, int peer, void* data, size_t bytes, uint32_t step) {
  Link& l = link(peer);
  r.start(peer, step, data, bytes);
  if (l.shm) {
    l.shm->postRecv(r);  // taken by the next pump (the wait's first step)
    return;
  }
  pushRequest(l.recvHead, l.recvTail, &r);
  if (l.recvHead == &r) {
    if (l.in == Inbound::kGone) gone(l);
    // What already arrived is taken now; the socket itself is left to the wait's epoll round
    // (probing it here mostly costs an EAGAIN).
    if (l.parked || l.stageAt < l.stageEnd) onReadable(l);  // also turns EPOLLIN back on
  }
}

void PeerTransport::wait(Request& r, Deadline deadline) {
  std::unique_ptr<Error> mine;  // set once this wait has timed out
  while (!r.done()) {
    if (deadline.expired()) {
      if (mine) throw *mine;
      mine = std::make_unique<Error>(ErrorCode::kTimeout, timeoutMessage(r));
      // Tell the peers now, then listen a little longer: the peer this rank waits for may itself
      // be stuck behind a silent rank and say so, which names the rank that is really missing.
      sendAbortFrames(*mine);
      deadline = Deadline::after(kTimeoutGrace);
    }
    if (!mine) {
      pollStuckOn(r, deadline);
      continue;
    }
    try {
      progress(deadline);
    } catch (const Error&) {
      if (abortFrom_ == r.peer) throw;
      // Another rank's account of the same stall; keep waiting for the one that matters.
    }
  }
}

void PeerTransport::pollStuckOn(const Request& r, Deadline deadline) {
  try {
    progress(deadline);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kTimeout || abortFrom_ == r.peer) throw;
    // A rank gave up waiting for this one, which is itself stuck: say on whom.
    throw Error(ErrorCode::kTimeout,
                std::string(e.what()) + "; this rank was itself " + waitingText(r));
  }
}

std::string PeerTransport::timeoutMessage(const Request& r) const {
  return "timed out " + waitingText(r);
}

std::string PeerTransport::waitingText(const Request& r) const {
  const Link& l = links_.at(static_cast<size_t>(r.peer));
  bool isSend = false;
  for (Request* q = l.sendHead; q; q = q->next) isSend |= (q == &r);
  if (l.shm) isSend = l.shm->holdsSend(&r);
  return std::string("waiting for rank ") + std::to_string(r.peer) + " (" + l.address + ") " +
         (isSend ? "to accept" : "to send") + " message " + std::to_string(r.step) + " (" +
         std::to_string(r.moved) + " of " + std::to_string(r.bytes) + " bytes moved)";
}

}  // namespace chorus::transport
