// Pipelined broadcast along the chain root -> root+1 -> ...: each rank forwards a segment as
// soon as it arrives, so the time is about one buffer plus (size-2) segments, plus one empty
// message from the last rank back to the root.
#include "algo/collectives.h"
#include "algo/ring_pattern.h"

#include <algorithm>

namespace chorus::algo {

void chainBroadcast(const Group& g, void* buf, size_t bytes, int root) {
  const int n = g.size, r = g.rank;
  const int rel = ringMod(r - root, n);
  const int prev = ringMod(r - 1, n), next = ringMod(r + 1, n);
  const size_t seg = std::max<size_t>(1, g.segmentBytes);
  const size_t segs = (bytes + seg - 1) / seg;
  auto* data = static_cast<uint8_t*>(buf);
  auto& sends = g.scratch->sends(segs);
  auto& recvs = g.scratch->recvs(segs);
  auto len = [&](size_t k) { return std::min(seg, bytes - k * seg); };
  const bool forwards = rel != n - 1;

  if (rel == 0) {
    for (size_t k = 0; k < segs; ++k) {
      g.tx->postSend(sends[k], next, data + k * seg, len(k), static_cast<uint32_t>(k));
    }
  } else {
    // Receive straight into the user's buffer: no copy.
    for (size_t k = 0; k < segs; ++k) {
      g.tx->postRecv(recvs[k], prev, data + k * seg, len(k), static_cast<uint32_t>(k));
    }
    for (size_t k = 0; k < segs; ++k) {
      g.wait(recvs[k]);
      if (forwards)
        g.tx->postSend(sends[k], next, data + k * seg, len(k), static_cast<uint32_t>(k));
    }
  }
  if (rel == 0 || forwards) {
    for (size_t k = 0; k < segs; ++k) g.wait(sends[k]);
  }
  // The end of the chain tells the root it is done. Besides making the root's completion mean
  // "everyone has it", this gives every rank a message to receive, so ranks that disagree on
  // the root (two would-be roots only send) detect the mismatch in this very call.
  transport::Request ack;
  const auto ackStep = static_cast<uint32_t>(segs);
  if (rel == n - 1) {
    g.tx->postSend(ack, next, nullptr, 0, ackStep);
    g.wait(ack);
  } else if (rel == 0) {
    g.tx->postRecv(ack, prev, nullptr, 0, ackStep);
    g.wait(ack);
  }
}

}  // namespace chorus::algo
