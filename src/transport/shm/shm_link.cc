#include "transport/shm/shm_link.h"

namespace chorus::transport::shm {

void ShmLink::postSend(Request& r) {
  channel_.postSend(r);
  pump();  // write at once, as over TCP
}

bool ShmLink::pump() {
  uint64_t abortedAt = channel_.peerAbortedAt();
  if (abortedAt != 0 && op_.inOp && abortedAt - 1 <= op_.current.seq) control_.throwPeerAbort();
  bool wake = false;
  bool moved = channel_.pump(op_.current, wake);
  if (wake) control_.wakePeer();
  return moved;
}

bool ShmLink::progress() {
  if (!busy()) return false;
  bool moved = pump();
  // Data the peer left in the ring may still complete a receive; otherwise its end is final.
  if (control_.peerLeft() &&
      (channel_.sending() || (channel_.receiving() && !channel_.inboundPending()))) {
    control_.throwPeerLeft();
  }
  return moved;
}

}  // namespace chorus::transport::shm
