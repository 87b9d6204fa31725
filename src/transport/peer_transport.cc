// Setup, posting and waiting.
#include "transport/peer_transport.h"

#include "common/errno_text.h"
#include "common/socket_io.h"
#include "transport/mismatch.h"
#include "transport/request_queue.h"
#include "transport/tcp/sealed_tcp_link.h"
#include "transport/wait_policy.h"

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
#include <thread>

namespace chorus::transport {
namespace {

constexpr std::chrono::milliseconds kTimeoutGrace{1000};

}  // namespace

PeerTransport::PeerTransport(int rank, int size, Fd listener,
                             std::vector<tcp::Connection> connections, Spin spin)
    : rank_(rank),
      size_(size),
      spin_(spin),
      listener_(std::move(listener)),
      sockets_(static_cast<size_t>(size)),
      rings_(static_cast<size_t>(size)),
      data_(static_cast<size_t>(size), nullptr),
      peerFailed_(new std::atomic<bool>[static_cast<size_t>(size)]()) {
  rates_.resize(2 * static_cast<size_t>(size));
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
    auto& socket = sockets_.at(static_cast<size_t>(c.peer));
    if (c.sealed) {
      socket = std::make_unique<tcp::SealedTcpLink>(c.peer, std::move(c.fd), std::move(c.address),
                                                    op_, epoll_.get(), std::move(c.sealed));
    } else {
      socket = std::make_unique<tcp::TcpLink>(c.peer, std::move(c.fd), std::move(c.address), op_,
                                              epoll_.get(), c.zeroCopy);
    }
    data_[static_cast<size_t>(c.peer)] = socket.get();
  }
}

PeerTransport::~PeerTransport() { close(); }

std::string PeerTransport::peerAddress(int peer) const {
  if (peer < 0 || peer >= size_ || !sockets_[static_cast<size_t>(peer)]) return "?";
  return sockets_[static_cast<size_t>(peer)]->address();
}

Link& PeerTransport::link(int peer) {
  if (peer < 0 || peer >= size_ || peer == rank_ || !sockets_[static_cast<size_t>(peer)] ||
      !sockets_[static_cast<size_t>(peer)]->connected()) {
    if (op_.broken) throw Error(ErrorCode::kAborted, "transport already aborted");
    throw Error(ErrorCode::kInternal, "no connection to rank " + std::to_string(peer));
  }
  return *data_[static_cast<size_t>(peer)];
}

void PeerTransport::beginOp(const OpDesc& op) {
  op_.current = op;
  op_.remember(op);
  op_.inOp = true;
  // A peer failed in a call this rank has now reached (read while this rank was still in an
  // earlier one, which could finish). It fails here, under this call's number: the abort this
  // rank sends names the call it is in, and peers still in the previous one (finished here)
  // must not fail there.
  if (op_.deferred && op.seq >= op_.deferredSeq) throw *op_.deferred;
  op_.dry = false;
  for (auto& s : sockets_) {
    if (s) s->onBeginOp();
  }
}

void PeerTransport::postSend(Request& r, int peer, const void* data, size_t bytes, uint32_t step) {
  Link& l = link(peer);
  try {
    if (l.peerLeft()) l.throwPeerLeft();
    r.start(peer, step, data, bytes);
    l.postSend(r);
    bytesSent_.store(bytesSent_.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
  } catch (const Error& e) {
    notePeerError(peer, e);
    throw;
  }
}

void PeerTransport::postRecv(Request& r, int peer, void* data, size_t bytes, uint32_t step) {
  Link& l = link(peer);
  r.start(peer, step, data, bytes);
  try {
    l.postRecv(r);
  } catch (const Error& e) {
    notePeerError(peer, e);
    throw;
  }
}

void PeerTransport::wait(Request& r, Deadline deadline) {
  if (r.done()) return;
  // The recorder's clock readings of this wait are made while there is nothing else to do
  // (op_state.h, polledAt), and end with it.
  struct PolledAtReset {
    OpState& op;
    ~PolledAtReset() { op.polledAt = 0; }
  } polledAtReset{op_};
  if (op_.detailed()) {
    op_.polledAt = trace::ticks();
    op_.recorder->waitingOn(r.peer, op_.polledAt);
  } else if (op_.recorder) {
    op_.recorder->waitingOn(r.peer);  // reads the clock only for the call's first wait
  }
  std::unique_ptr<Error> mine;  // set once this wait has timed out
  // Over TCP, the rate so far tells when a large request will end (wait_policy.h). Smaller ones
  // never read the clock for it: a clock read costs 30 ns here, 4% of a small shm all-reduce.
  const bool paced =
      r.bytes - r.moved > kRateSampleBytes && std::strcmp(pathTo(r.peer), "tcp") == 0;
  const auto began = paced ? Clock::now() : Clock::time_point{};
  const size_t movedBefore = r.moved;
  // Until this wait has a rate of its own, the last one's on this link and direction, if recent
  // (a ring's next segment, mostly): without it, each segment's wait polled at full speed through
  // its first kRateSampleBytes, half a millisecond per segment at 1 Gbit/s.
  LinkRate* rate = nullptr;
  double carried = 0;
  if (paced) {
    rate = &rates_[2 * static_cast<size_t>(r.peer) + (data_[r.peer]->holdsSend(&r) ? 1 : 0)];
    if (began - rate->at < kCarriedRateFor) carried = rate->bytesPerNs;
  }
  bool firstPass = true;
  bool looked = false;  // a pass of progress ran
  while (!r.done()) {
    // A pass of progress that moved other data may have taken a while: read the clock again.
    if (!firstPass) op_.refreshPolledAt();
    firstPass = false;
    if (deadline.expired()) {
      if (mine) {
        notePeerFailed(r.peer);  // it never answered, nor said why
        throw *mine;
      }
      mine = std::make_unique<Error>(ErrorCode::kTimeout, timeoutMessage(r));
      if (op_.recorder) op_.recorder->timedOut(op_.current, mine->what());
      // Tell the peers now, then listen a little longer: the peer this rank waits for may itself
      // be stuck behind a silent rank and say so, which names the rank that is really missing.
      sendAbortFrames(*mine);
      deadline = Deadline::after(kTimeoutGrace);
    }
    if (!mine) {
      if (paced) {
        double bytesPerNs = rateOf(r.moved - movedBefore, Clock::now() - began);
        if (bytesPerNs <= 0) bytesPerNs = carried;
        spinNow_ = !endIsFarAt(bytesPerNs, r.bytes - r.moved, kFarSpins * spin_.duration);
        // The first pass reads what is already there (or sleeps until something comes) first.
        if (!spinNow_ && looked) {
          std::this_thread::sleep_for(napAt(bytesPerNs));
          op_.refreshPolledAt();
        }
      }
      pollStuck(r, deadline);
      looked = true;
      spinNow_ = true;
      continue;
    }
    try {
      progress(deadline);
    } catch (const Error&) {
      if (op_.abortFrom == r.peer) throw;
      // Another rank's account of the same stall; keep waiting for the one that matters.
    }
  }
  if (rate) {
    const auto now = Clock::now();
    const double measured = rateOf(r.moved - movedBefore, now - began);
    if (measured > 0) *rate = {measured, now};
  }
  if (op_.recorder) op_.recorder->running();
}

void PeerTransport::pollStuckOn(const Request& r, Deadline deadline) {
  if (op_.recorder) op_.recorder->waitingOn(r.peer);
  pollStuck(r, deadline);
  if (op_.recorder) op_.recorder->running();
}

void PeerTransport::pollStuck(const Request& r, Deadline deadline) {
  try {
    progress(deadline);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kTimeout || op_.abortFrom == r.peer) throw;
    // A rank gave up waiting for this one, which is itself stuck: say on whom.
    throw Error(ErrorCode::kTimeout,
                std::string(e.what()) + "; this rank was itself " + waitingText(r));
  }
}

std::string PeerTransport::timeoutMessage(const Request& r) const {
  return "timed out " + waitingText(r);
}

std::string PeerTransport::waitingText(const Request& r) const {
  const Link* l = data_.at(static_cast<size_t>(r.peer));
  bool isSend = l && l->holdsSend(&r);
  return std::string("waiting for rank ") + std::to_string(r.peer) + " (" + peerAddress(r.peer) +
         ") " + (isSend ? "to accept" : "to send") + " message " + std::to_string(r.step) + " (" +
         std::to_string(r.moved) + " of " + std::to_string(r.bytes) + " bytes moved)";
}

}  // namespace chorus::transport
