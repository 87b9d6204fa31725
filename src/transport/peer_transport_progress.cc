// The progress loop: spinning, sleeping in epoll_wait, dispatching socket events.
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

// Shared-memory polls between two epoll checks while spinning.
constexpr int kSharedPolls = 32;
constexpr int kSharedPollsAlone = 1024;
// Shared-memory polls per clock reading for the recorder (a power of two): about half a
// microsecond of polling, so that an arrival is stamped that close to when it was seen.
constexpr int kPollsPerReading = 8;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

void PeerTransport::progress(Deadline deadline) {
  if (interrupted_.load(std::memory_order_relaxed)) {
    throw Error(ErrorCode::kAborted, "aborted by the application");
  }
  const bool shared = !shared_.empty();
  if (shared && pumpShared()) return;
  epoll_event events[64];
  int n = 0;
  if (spin_.duration.count() > 0 && spinAllowed_ && spinNow_) {
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
          // Within a wait that the recorder follows: a clock reading every few polls, taken
          // while there is nothing to do, stamps what the next polls find (op_state.h).
          if ((i & (kPollsPerReading - 1)) == kPollsPerReading - 1) op_.refreshPolledAt();
          if (pumpShared()) return;
          cpuRelax();
        }
      }
      op_.refreshPolledAt();
      if ((n = ::epoll_wait(epoll_.get(), events, 64, 0)) != 0) break;
      op_.dry = true;
      if (Clock::now() >= until) break;
      if (spin_.yield) {
        sched_yield();  // others may have run for a while: the polls after it need a new reading
        op_.refreshPolledAt();
      }
    }
  }
  if (n == 0 && !op_.dry) {
    // Not looked yet in this call: whatever is here now was waiting before this rank started.
    n = ::epoll_wait(epoll_.get(), events, 64, 0);
    op_.dry = n == 0;
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
    op_.refreshPolledAt();
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
    if (key < sockets_.size() && sockets_[key]) {
      try {
        sockets_[key]->onEvents(ev);
      } catch (const Error& e) {
        notePeerError(static_cast<int>(key), e);
        throw;
      }
    }
  }
}

}  // namespace chorus::transport
