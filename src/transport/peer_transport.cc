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

constexpr uint64_t kWakeKey = ~uint64_t{0};
constexpr uint64_t kListenerKey = ~uint64_t{0} - 1;
constexpr std::chrono::milliseconds kTimeoutGrace{1000};
// Shared-memory polls between two epoll checks while spinning.
constexpr int kSharedPolls = 32;
constexpr int kSharedPollsAlone = 1024;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

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

void PeerTransport::attachSharedMemory(shm::Segment self, std::vector<shm::PeerLink> links) {
  shmSelf_ = std::move(self);
  for (auto& s : links) {
    Link& l = link(s.peer);
    l.shmSegment = std::move(s.peerSegment);
    l.shm = std::make_unique<shm::Channel>(s.config);
    sharedPeers_.push_back(s.peer);
  }
  onlyShared_ = static_cast<int>(sharedPeers_.size()) == size_ - 1;
}

bool PeerTransport::sharedBusy() const {
  for (int p : sharedPeers_) {
    const Link& l = links_[static_cast<size_t>(p)];
    if (l.shm && (l.shm->sending() || l.shm->receiving())) return true;
  }
  return false;
}

bool PeerTransport::pumpShared() {
  bool moved = false;
  for (int p : sharedPeers_) {
    Link& l = links_[static_cast<size_t>(p)];
    if (!l.shm || !(l.shm->sending() || l.shm->receiving())) continue;
    moved |= pumpLink(l);
    if (l.in == Inbound::kGone &&
        (l.shm->sending() || (l.shm->receiving() && !l.shm->inboundPending()))) {
      gone(l);
    }
  }
  return moved;
}

bool PeerTransport::pumpLink(Link& l) {
  uint64_t abortedAt = l.shm->peerAbortedAt();
  if (abortedAt != 0 && inOp_ && abortedAt - 1 <= current_.seq) sharedPeerAborted(l);
  bool wake = false;
  bool moved = l.shm->pump(current_, wake);
  if (wake) sendWake(l);
  return moved;
}

void PeerTransport::sharedPeerAborted(Link& l) {
  // The reason follows on the TCP connection; read it (it throws), waiting a little for it.
  Deadline deadline = Deadline::after(std::chrono::seconds(1));
  while (!deadline.expired() && l.in != Inbound::kGone) {
    onReadable(l);
    pollfd p{l.fd.get(), POLLIN, 0};
    ::poll(&p, 1, deadline.remainingMs(100));
  }
  abortFrom_ = l.peer;
  throw Error(ErrorCode::kPeerFailure,
              "rank " + std::to_string(l.peer) + " (" + l.address + ") aborted its communicator");
}

void PeerTransport::sendWake(Link& l) noexcept {
  if (!l.fd || l.in == Inbound::kGone || broken_) return;
  FrameHeader h;
  h.kind = FrameKind::kWake;
  h.op = current_;
  uint8_t header[kFrameHeaderBytes];
  encodeFrame(h, header);
  // Control frames are never interleaved with data on this socket, so a frame is only cut short
  // by a full socket buffer; finish it (a sleeping peer drains the socket as soon as it wakes).
  sendAll(l.fd.get(), header, kFrameHeaderBytes, Deadline::after(std::chrono::seconds(1)));
}

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

void PeerTransport::encodeSendHeader(Link& l) {
  FrameHeader h;
  h.kind = FrameKind::kData;
  h.op = current_;
  h.step = l.sendHead->step;
  h.bytes = l.sendHead->bytes;
  encodeFrame(h, l.sendHeader);
  l.headerSent = 0;
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

void PeerTransport::progress(Deadline deadline) {
  if (interrupted_.load(std::memory_order_relaxed)) {
    throw Error(ErrorCode::kAborted, "aborted by the application");
  }
  const bool shared = !sharedPeers_.empty();
  if (shared && pumpShared()) return;
  epoll_event events[64];
  int n = 0;
  if (spin_.duration.count() > 0 && spinAllowed_) {
    // Poll briefly before sleeping: a wake-up costs more than a small message's round trip.
    // With more ranks than cores, each poll gives the core to a rank that has work (the peer
    // this rank waits for, often), as a sleep would, but without the wake-up latency after it.
    auto until = Clock::now() + spin_.duration;
    // With every peer on shared memory the sockets only carry rare control frames: look at them
    // every few microseconds rather than at every poll (a system call costs more than the
    // round trip of a small message here).
    // Ranks that outnumber the cores give theirs away after a few polls instead.
    const int polls = spin_.yield ? 4 : onlyShared_ ? kSharedPollsAlone : kSharedPolls;
    for (;;) {
      if (shared) {
        for (int i = 0; i < polls; ++i) {
          if (pumpShared()) return;
          cpuRelax();
        }
      }
      if ((n = ::epoll_wait(epoll_.get(), events, 64, 0)) != 0) break;
      if (Clock::now() >= until) break;
      if (spin_.yield) sched_yield();
    }
  }
  if (n == 0) {
    // Before sleeping, say so where shared-memory peers look, then look at the rings once more:
    // a peer that publishes after this either is seen now or sees the flag and wakes this rank.
    std::atomic<uint32_t>* sleeping =
        shared && sharedBusy() ? &shmSelf_.header().sleeping : nullptr;
    if (sleeping) {
      sleeping->store(1, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (pumpShared()) {
        sleeping->store(0, std::memory_order_relaxed);
        return;
      }
    }
    n = ::epoll_wait(epoll_.get(), events, 64, deadline.remainingMs(1000));
    if (sleeping) sleeping->store(0, std::memory_order_relaxed);
  }
  if (n < 0) {
    if (errno == EINTR) return;
    throw Error(ErrorCode::kSystem, "epoll_wait: " + errnoText(errno));
  }
  for (int i = 0; i < n; ++i) {
    uint64_t key = events[i].data.u64;
    uint32_t ev = events[i].events;
    if (key == kWakeKey) {
      uint64_t v;
      [[maybe_unused]] auto ignored = ::read(wake_.get(), &v, sizeof(v));
      if (interrupted_.load()) throw Error(ErrorCode::kAborted, "aborted by the application");
      continue;
    }
    if (key == kListenerKey) {
      // Connections after setup are not part of this job: accept and drop them.
      int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) ::close(fd);
      continue;
    }
    Link& l = links_[key];
    if (!l.fd || l.in == Inbound::kGone) continue;
    // Reads first: an abort message from the peer explains a failing write better than EPIPE.
    if ((ev & EPOLLIN) && l.parked && !l.recvHead) l.muted = true;  // more behind a parked frame
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) onReadable(l);
    if (ev & EPOLLOUT) onWritable(l);
    if ((ev & (EPOLLERR | EPOLLHUP)) && l.in != Inbound::kGone) {
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(l.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (l.sawBye) {
        onEof(l);
      } else {
        lost(l, err ? errnoText(err) : "connection closed by peer");
      }
    }
    if ((ev & EPOLLRDHUP) && !(l.events & EPOLLIN)) {
      // The peer finished sending; what it sent is still queued behind a parked frame.
      l.halfClosed = true;
      updateEvents(l);
    }
  }
}

void PeerTransport::updateEvents(Link& l) {
  if (!l.fd || l.in == Inbound::kGone) return;
  uint32_t want = 0;
  if (!(l.parked && !l.recvHead && l.muted)) want |= EPOLLIN;
  if (l.writeBlocked && l.sendHead) want |= EPOLLOUT;
  if (!l.halfClosed) want |= EPOLLRDHUP;
  if (want == l.events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = static_cast<uint64_t>(l.peer);
  epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, l.fd.get(), &ev);
  l.events = want;
}

void PeerTransport::onWritable(Link& l) {
  l.writeBlocked = false;
  while (l.sendHead) {
    Request& r = *l.sendHead;
    iovec iov[2];
    int n = 0;
    if (l.headerSent < kFrameHeaderBytes) {
      iov[n++] = {l.sendHeader + l.headerSent, kFrameHeaderBytes - l.headerSent};
    }
    if (r.moved < r.bytes) iov[n++] = {r.data + r.moved, r.bytes - r.moved};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(n);
    ssize_t k = ::sendmsg(l.fd.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        l.writeBlocked = true;
        break;
      }
      lost(l, errnoText(errno));
    }
    size_t sent = static_cast<size_t>(k);
    size_t h = std::min(sent, kFrameHeaderBytes - l.headerSent);
    l.headerSent += h;
    r.moved += sent - h;
    l.frameLeft = (kFrameHeaderBytes - l.headerSent) + (r.bytes - r.moved);
    if (l.frameLeft == 0) {
      popRequest(l.sendHead, l.sendTail);
      r.state = Request::State::kDone;
      if (l.sendHead) encodeSendHeader(l);
    }
  }
  updateEvents(l);
}

bool PeerTransport::readSome(Link& l, uint8_t* dst, size_t want, size_t& got) {
  for (;;) {
    if (l.stageAt < l.stageEnd) {
      size_t k = std::min(l.stageEnd - l.stageAt, want - got);
      std::memcpy(dst + got, l.stage + l.stageAt, k);
      l.stageAt += k;
      got += k;
      return true;
    }
    const bool staged = want - got < kStageBytes;
    ssize_t k = staged ? ::recv(l.fd.get(), l.stage, kStageBytes, MSG_DONTWAIT)
                       : ::recv(l.fd.get(), dst + got, want - got, MSG_DONTWAIT);
    if (k > 0 && staged) {
      l.stageAt = 0;
      l.stageEnd = static_cast<size_t>(k);
      continue;
    }
    if (k > 0) {
      got += static_cast<size_t>(k);
      return true;
    }
    if (k == 0) {
      onEof(l);  // throws unless the peer said goodbye
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
    lost(l, errnoText(errno));
  }
}

void PeerTransport::onReadable(Link& l) {
  while (l.in != Inbound::kGone) {
    if (l.in == Inbound::kHeader) {
      if (l.parked) {
        if (!l.recvHead) break;
        startPayload(l);
        continue;
      }
      if (!readSome(l, l.recvHeader, kFrameHeaderBytes, l.headerGot)) break;
      if (l.headerGot < kFrameHeaderBytes) continue;
      l.headerGot = 0;
      std::string why;
      auto h = decodeFrame(l.recvHeader, &why);
      if (!h) lost(l, "protocol violation: " + why);
      onHeader(l, *h);
    } else if (l.in == Inbound::kPayload) {
      Request& r = *l.recvHead;
      if (r.moved < r.bytes) {
        if (!readSome(l, r.data, r.bytes, r.moved)) break;  // nothing more now, or peer gone
        if (r.moved < r.bytes) continue;
      }
      popRequest(l.recvHead, l.recvTail);
      r.state = Request::State::kDone;
      l.in = Inbound::kHeader;
      l.parked = false;
      l.muted = false;
      // Nothing more awaited here: leave the socket to epoll rather than probe it (EAGAIN).
      if (!l.recvHead && l.stageAt == l.stageEnd) break;
    } else {  // Inbound::kAbortText
      auto* text = reinterpret_cast<uint8_t*>(l.abortText.data());
      if (!readSome(l, text, l.abortText.size(), l.abortGot)) break;
      if (l.abortGot == l.abortText.size()) onAbortText(l);
    }
  }
  updateEvents(l);
}

void PeerTransport::onAbortText(Link& l) {
  uint32_t code;
  std::memcpy(&code, l.abortText.data(), 4);
  if (code == 0 || code > static_cast<uint32_t>(ErrorCode::kInternal)) {
    code = static_cast<uint32_t>(ErrorCode::kPeerFailure);
  }
  l.in = Inbound::kHeader;
  Error remote(static_cast<ErrorCode>(code),
               "rank " + std::to_string(l.peer) + " failed: " + l.abortText.substr(4));
  if (inOp_ && l.abortSeq > current_.seq) {
    l.abortedLater = true;
    if (!deferred_) deferred_ = std::make_unique<Error>(remote);
    return;
  }
  abortFrom_ = l.peer;
  l.abortRead = true;
  throw remote;
}

void PeerTransport::onHeader(Link& l, const FrameHeader& h) {
  switch (h.kind) {
    case FrameKind::kData:
      l.parked = true;
      l.parkedHeader = h;
      checkParked(l);
      return;
    case FrameKind::kAbort:
      l.abortSeq = h.op.seq;
      l.in = Inbound::kAbortText;
      l.abortText.assign(h.bytes, '\0');
      l.abortGot = 0;
      return;
    case FrameKind::kBye:
      l.sawBye = true;
      return;
    case FrameKind::kWake:
      return;  // waking up was the point
  }
}

// A frame that arrived for the collective this rank is running must describe the same call.
void PeerTransport::checkParked(Link& l) {
  const OpDesc& theirs = l.parkedHeader.op;
  if (!inOp_ || theirs.seq > current_.seq) return;  // the peer is ahead: checked at beginOp
  if (theirs.sameCall(current_)) return;
  // A frame for a call this rank has already finished: compare with what it called then.
  const OpDesc& mine =
      theirs.seq < current_.seq && history_[theirs.seq % history_.size()].seq == theirs.seq
          ? history_[theirs.seq % history_.size()]
          : current_;
  if (auto mismatch = findMismatch(l.peer, l.parkedHeader, mine, nullptr)) throw *mismatch;
}

void PeerTransport::startPayload(Link& l) {
  checkParked(l);
  const FrameHeader& h = l.parkedHeader;
  Request& r = *l.recvHead;
  if (auto mismatch = findMismatch(l.peer, h, current_, &r)) throw *mismatch;
  l.in = Inbound::kPayload;
}

void PeerTransport::onEof(Link& l) {
  if (!l.sawBye && !l.abortedLater) lost(l, "connection closed by peer");
  l.in = Inbound::kGone;
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, l.fd.get(), nullptr);
  if (l.recvHead || l.sendHead) gone(l);
}

void PeerTransport::gone(Link& l) {
  if (l.abortedLater && deferred_) throw *deferred_;
  throw Error(ErrorCode::kPeerFailure,
              "rank " + std::to_string(l.peer) + " (" + l.address +
                  ") closed its communicator while this rank still exchanges data with it "
                  "(did the ranks run different numbers of collectives?)");
}

void PeerTransport::salvageAbort(Link& l) noexcept {
  // Skip whatever data is queued and look for the peer's abort message behind it; give up at
  // the first sign of trouble (this is only for a better message).
  try {
    l.recvHead = l.recvTail = nullptr;
    size_t budget = 64u << 20;
    uint8_t sink[16384];
    for (int spins = 0; spins < 1000 && l.in != Inbound::kGone; ++spins) {
      if (l.in == Inbound::kHeader && l.parked) {
        uint64_t left = l.parkedHeader.bytes;
        uint64_t fromStage = std::min<uint64_t>(left, l.stageEnd - l.stageAt);
        l.stageAt += fromStage;
        left -= fromStage;
        while (left > 0 && budget > 0) {
          ssize_t k =
              ::recv(l.fd.get(), sink, std::min<uint64_t>(left, sizeof(sink)), MSG_DONTWAIT);
          if (k <= 0) return;
          left -= static_cast<uint64_t>(k);
          budget -= std::min(budget, static_cast<size_t>(k));
        }
        if (left > 0) return;
        l.parked = false;
        continue;
      }
      if (l.in == Inbound::kPayload) return;
      ssize_t k = ::recv(l.fd.get(), l.abortText.data(), 0, MSG_DONTWAIT | MSG_PEEK);
      if (k < 0 && l.stageAt == l.stageEnd) return;
      onReadable(l);  // throws the remote abort once its text is complete
      if (l.in == Inbound::kHeader && !l.parked) return;
    }
  } catch (const Error& e) {
    salvaged_ = std::make_unique<Error>(e);
  } catch (...) {
  }
}

void PeerTransport::lost(Link& l, const std::string& why) {
  if (l.abortedLater && deferred_) throw *deferred_;
  if (!salvaging_) {
    salvaging_ = true;
    salvageAbort(l);
    salvaging_ = false;
    if (salvaged_) {
      Error e = *salvaged_;
      salvaged_.reset();
      // The peer's own account (its abort message, or its goodbye) says more than the loss.
      if (l.abortRead || l.sawBye) throw e;
    }
  }
  throw Error(ErrorCode::kPeerFailure,
              "lost connection to rank " + std::to_string(l.peer) + " (" + l.address + "): " + why);
}

void PeerTransport::interrupt() noexcept {
  interrupted_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] auto ignored = ::write(wake_.get(), &one, sizeof(one));
}

void PeerTransport::sendAbortFrames(const Error& cause) noexcept {
  if (abortSent_) return;
  abortSent_ = true;
  if (shmSelf_) shmSelf_.header().abortedAt.store(current_.seq + 1, std::memory_order_release);
  std::string text(4, '\0');
  uint32_t code = static_cast<uint32_t>(cause.code());
  std::memcpy(text.data(), &code, 4);
  text += std::string(cause.what()).substr(0, kMaxAbortMessage - 8);
  FrameHeader h;
  h.kind = FrameKind::kAbort;
  h.op = current_;
  h.bytes = text.size();
  uint8_t header[kFrameHeaderBytes];
  encodeFrame(h, header);
  for (auto& l : links_) {
    if (!l.fd || l.in == Inbound::kGone) continue;
    // A frame half written must be completed before the abort can follow it; its requests may
    // be gone already, so the rest is sent as zeros (the peer discards it when it reads why).
    if (l.frameLeft > 0 && !padFrame(l)) continue;
    iovec iov[2] = {{header, kFrameHeaderBytes}, {text.data(), text.size()}};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = 2;
    [[maybe_unused]] auto ignored = ::sendmsg(l.fd.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

bool PeerTransport::padFrame(Link& l) noexcept {
  static const uint8_t zeros[65536] = {};
  Deadline deadline = Deadline::after(std::chrono::milliseconds(2000));
  while (l.frameLeft > 0) {
    ssize_t k = ::send(l.fd.get(), zeros, std::min(l.frameLeft, sizeof(zeros)),
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      l.frameLeft -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EINTR) return false;
    pollfd p{l.fd.get(), POLLOUT, 0};
    if (deadline.expired() || ::poll(&p, 1, deadline.remainingMs(100)) < 0) return false;
  }
  return true;
}

void PeerTransport::abort(const Error& cause) noexcept {
  if (broken_) return;
  broken_ = true;
  sendAbortFrames(cause);
  for (auto& l : links_) {
    if (!l.fd) continue;
    l.sendHead = l.sendTail = nullptr;
    l.recvHead = l.recvTail = nullptr;
    if (l.shm) l.shm->clear();
    // Half-close now so peers see the abort; the socket itself closes with the transport.
    ::shutdown(l.fd.get(), SHUT_WR);
  }
}

void PeerTransport::drainAndClose(Link& l) noexcept {
  // Unread bytes at close() make the kernel reset the connection and drop data we still owe the
  // peer, so read what is there first.
  char sink[4096];
  while (::recv(l.fd.get(), sink, sizeof(sink), MSG_DONTWAIT) > 0) {
  }
  l.fd.reset();
}

void PeerTransport::close() noexcept {
  if (!broken_) {
    FrameHeader h;
    h.kind = FrameKind::kBye;
    h.op = current_;
    uint8_t header[kFrameHeaderBytes];
    encodeFrame(h, header);
    for (auto& l : links_) {
      if (!l.fd || l.in == Inbound::kGone || l.sendHead) continue;
      [[maybe_unused]] auto ignored =
          ::send(l.fd.get(), header, kFrameHeaderBytes, MSG_NOSIGNAL | MSG_DONTWAIT);
      ::shutdown(l.fd.get(), SHUT_WR);
    }
    broken_ = true;
  }
  for (auto& l : links_) {
    if (l.fd) drainAndClose(l);
  }
  listener_.reset();
}

}  // namespace chorus::transport
