#include "transport/tcp/zero_copy.h"

#include <linux/errqueue.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif

namespace chorus::transport::tcp {
namespace {

std::atomic<bool> refuseForTesting{false};
std::atomic<uint64_t> zeroCopyCalls{0};

}  // namespace

void refuseZeroCopyForTesting(bool refuse) { refuseForTesting.store(refuse); }

uint64_t zeroCopyCallsForTesting() { return zeroCopyCalls.load(); }

uint32_t ZeroCopy::sent() {
  zeroCopyCalls.fetch_add(1, std::memory_order_relaxed);
  return nextId_++;
}

void ZeroCopy::enable(int fd, const ZeroCopySettings& settings) {
  on_ = false;
  if (settings.minBytes == 0 || refuseForTesting.load()) return;
  int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) != 0) return;
  on_ = true;
  armed_ = true;
  minBytes_ = settings.minBytes;
  keepWhenCopied_ = settings.keepWhenCopied;
}

bool ZeroCopy::holds(const Request* r) const {
  for (size_t i = heldAt_; i < held_.size(); ++i) {
    if (held_[i].first == r) return true;
  }
  return false;
}

bool ZeroCopy::readNotifications(int fd) {
  for (;;) {
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(sock_extended_err)) + 64];
    msghdr m{};
    m.msg_control = control;
    m.msg_controllen = sizeof(control);
    if (::recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
      const bool ipError = (c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
                           (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR);
      if (!ipError) continue;
      sock_extended_err e;
      std::memcpy(&e, CMSG_DATA(c), sizeof(e));
      if (e.ee_origin != SO_EE_ORIGIN_ZEROCOPY || e.ee_errno != 0) return false;
      complete(e.ee_info, e.ee_data);
      if (e.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) {
        ++copied_;
        // The kernel copied these pages anyway: pinning them only cost time.
        if (!keepWhenCopied_) on_ = false;
      }
    }
  }
}

void ZeroCopy::complete(uint32_t lo, uint32_t hi) {
  ahead_.push_back({lo, hi});
  // Fold every range that now touches doneBelow_ into it.
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t i = 0; i < ahead_.size(); ++i) {
      auto [a, b] = ahead_[i];
      if (static_cast<int32_t>(a - doneBelow_) <= 0) {
        if (static_cast<int32_t>(b + 1 - doneBelow_) > 0) doneBelow_ = b + 1;
        ahead_[i] = ahead_.back();
        ahead_.pop_back();
        moved = true;
        break;
      }
    }
  }
}

}  // namespace chorus::transport::tcp
