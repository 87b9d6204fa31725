// MSG_ZEROCOPY sends of one socket: the kernel sends large payloads straight from the caller's
// buffer and says in the socket's error queue when it no longer needs those pages. A send request
// sent this way is held (not done) until then, so a caller never reuses a buffer the kernel still
// reads. Off unless Options::tcp.zeroCopyBytes (CHORUS_TCP_ZEROCOPY_BYTES) is set: where the kernel
// copies anyway (loopback, veth, any delivery to a local socket) zero-copy only adds the page
// pinning and the notifications, and the socket goes back to ordinary sends once a notification
// says it copied.
#pragma once

#include "transport/data_path.h"

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace chorus::transport::tcp {

// Options::tcp (TcpOptions) as the links use it.
struct ZeroCopySettings {
  size_t minBytes = 0;          // TcpOptions::zeroCopyBytes: sends of at least this size; 0: off
  bool keepWhenCopied = false;  // TcpOptions::zeroCopyKeep: stay on though the kernel copies
};

// For tests: make SO_ZEROCOPY fail on new sockets, as on a kernel without it.
void refuseZeroCopyForTesting(bool refuse);
// For tests: MSG_ZEROCOPY calls that the kernel accepted, in this process.
uint64_t zeroCopyCallsForTesting();

class ZeroCopy {
 public:
  ZeroCopy() = default;
  // Turns SO_ZEROCOPY on for fd when settings ask for it; stays off when the socket refuses.
  void enable(int fd, const ZeroCopySettings& settings);
  // Whether a payload of `bytes` goes out with MSG_ZEROCOPY now.
  bool wants(size_t bytes) const { return on_ && bytes >= minBytes_; }
  // One MSG_ZEROCOPY sendmsg moved bytes: the id the kernel gave that call.
  uint32_t sent();
  // The kernel refused to pin more pages (ENOBUFS): this send is copied instead.
  void refusedOnce() { ++refusals_; }
  // Keeps r, whose payload was all written and whose last zero-copy call was `lastId`, until
  // the kernel has released every call up to it.
  void hold(Request* r, uint32_t lastId) { held_.push_back({r, lastId}); }
  bool holds(const Request* r) const;
  bool holding() const { return heldAt_ < held_.size(); }
  // Reads the error queue's notifications and calls done(r) for each held request, in order,
  // whose pages are all released. False when the queue held something else (a real error).
  template <class Done>
  bool reap(int fd, Done&& done) {
    if (!readNotifications(fd)) return false;
    while (heldAt_ < held_.size() && released(held_[heldAt_].second)) {
      Request* r = held_[heldAt_++].first;
      done(*r);
    }
    if (heldAt_ == held_.size()) {
      held_.clear();
      heldAt_ = 0;
    }
    return true;
  }
  // Forgets every held request (after an abort: the call fails rather than completes).
  void forget() noexcept {
    held_.clear();
    heldAt_ = 0;
  }
  bool on() const { return on_; }
  // SO_ZEROCOPY was turned on: notifications may come, even after on() went false.
  bool armed() const { return armed_; }
  uint64_t copiedNotices() const { return copied_; }
  uint64_t refusals() const { return refusals_; }

 private:
  bool readNotifications(int fd);
  void complete(uint32_t lo, uint32_t hi);
  bool released(uint32_t id) const { return static_cast<int32_t>(id - doneBelow_) < 0; }

  bool on_ = false;
  bool armed_ = false;
  bool keepWhenCopied_ = false;
  size_t minBytes_ = 0;
  uint32_t nextId_ = 0;     // the kernel numbers zero-copy calls 0, 1, 2, ... per socket
  uint32_t doneBelow_ = 0;  // every call before this one is released
  // Released ranges above doneBelow_ (notifications may come out of order), inclusive.
  std::vector<std::pair<uint32_t, uint32_t>> ahead_;
  std::vector<std::pair<Request*, uint32_t>> held_;
  size_t heldAt_ = 0;
  uint64_t copied_ = 0;
  uint64_t refusals_ = 0;
};

}  // namespace chorus::transport::tcp
