#include "algo/ring.h"

#include "algo/ring_pattern.h"

#include <algorithm>
#include <cstring>

namespace chorus::algo {
namespace {

struct Unit {
  bool reducing;       // reduce-scatter step (receive into a slot, then reduce)
  bool last;           // last reduce-scatter step: the result is final
  const uint8_t* src;  // what this unit sends
  size_t sendBytes;
  uint8_t* dst;         // reduce: where a op slot goes; gather: where the bytes land
  const uint8_t* mine;  // reduce: this rank's contribution to the received segment
  size_t recvBytes;
  int slot;
};

}  // namespace

void ringRun(const Group& g, const RingSpec& s) {
  const int n = g.size;
  const int r = g.rank;
  const size_t esize = sizeOf(s.dtype);
  auto block = [&](int i) {
    return s.blockCount ? Block{static_cast<size_t>(i) * s.blockCount, s.blockCount}
                        : balancedBlock(s.totalCount, n, i);
  };
  size_t maxBlock = block(0).count;  // block 0 is never smaller than the others
  size_t segElems = std::max<size_t>(1, g.segmentBytes / esize);
  size_t segs = std::max<size_t>(1, (maxBlock + segElems - 1) / segElems);
  int rsSteps = s.reduce ? n - 1 : 0;
  int agSteps = s.gather ? n - 1 : 0;
  size_t total = static_cast<size_t>(rsSteps + agSteps) * segs;
  if (total == 0) return;

  // Plan every unit (step t, segment k) up front: pure arithmetic, no I/O.
  thread_local std::vector<Unit> units;
  units.assign(total, Unit{});
  for (int t = 0; t < rsSteps + agSteps; ++t) {
    bool rs = t < rsSteps;
    int ta = t - rsSteps;
    int sb = rs ? ringRsSendBlock(r, n, t) : ringAgSendBlock(r, n, ta);
    int rb = rs ? ringRsRecvBlock(r, n, t) : ringAgRecvBlock(r, n, ta);
    Block sblk = block(sb), rblk = block(rb);
    for (size_t k = 0; k < segs; ++k) {
      Unit& u = units[static_cast<size_t>(t) * segs + k];
      size_t k0 = k * segElems;
      size_t sc = sblk.count > k0 ? std::min(segElems, sblk.count - k0) : 0;
      size_t rc = rblk.count > k0 ? std::min(segElems, rblk.count - k0) : 0;
      size_t soff = (sblk.offset + k0) * esize, roff = (rblk.offset + k0) * esize;
      u.reducing = rs;
      u.last = rs && t == rsSteps - 1;
      u.sendBytes = sc * esize;
      u.recvBytes = rc * esize;
      if (rs) {
        u.src = (t == 0 ? s.in : s.acc) + soff;
        u.dst = (u.last ? s.own + k0 * esize : s.acc + roff);
        u.mine = s.in + roff;
      } else {
        u.src = (ta == 0 ? s.own + k0 * esize : s.acc + soff);
        u.dst = s.acc + roff;
      }
    }
  }

  const int prev = ringMod(r - 1, n), next = ringMod(r + 1, n);
  const size_t slotBytes = segElems * esize;
  const int window = static_cast<int>(std::clamp<size_t>((8u << 20) / slotBytes, 2, 16));
  uint8_t* slots = s.reduce ? g.scratch->second(slotBytes * static_cast<size_t>(window)) : nullptr;
  auto& sends = g.scratch->sends(total);
  auto& recvs = g.scratch->recvs(total);
  reduce::ReduceFn fn = s.reduce ? reduce::reduceFn(s.dtype, s.op) : nullptr;

  size_t nextRecv = 0;
  int slotsInUse = 0, nextSlot = 0;
  auto postRecvs = [&] {
    while (nextRecv < total) {
      Unit& u = units[nextRecv];
      if (u.recvBytes > 0) {
        if (u.reducing) {
          if (slotsInUse == window) return;
          u.slot = nextSlot;
          nextSlot = (nextSlot + 1) % window;
          ++slotsInUse;
          g.tx->postRecv(recvs[nextRecv], prev, slots + slotBytes * static_cast<size_t>(u.slot),
                         u.recvBytes, static_cast<uint32_t>(nextRecv));
        } else {
          g.tx->postRecv(recvs[nextRecv], prev, u.dst, u.recvBytes,
                         static_cast<uint32_t>(nextRecv));
        }
      }
      ++nextRecv;
    }
  };
  auto postSend = [&](size_t i) {
    if (units[i].sendBytes > 0) {
      g.tx->postSend(sends[i], next, units[i].src, units[i].sendBytes, static_cast<uint32_t>(i));
    }
  };

  postRecvs();
  for (size_t i = 0; i < std::min(segs, total); ++i) postSend(i);
  for (size_t v = 0; v < total; ++v) {
    Unit& u = units[v];
    if (u.recvBytes > 0) {
      g.wait(recvs[v]);
      if (u.reducing) {
        size_t count = u.recvBytes / esize;
        fn(u.dst, u.mine, slots + slotBytes * static_cast<size_t>(u.slot), count);
        if (u.last && s.op == ReduceOp::kAvg) reduce::divide(u.dst, count, s.dtype, n);
        --slotsInUse;
        postRecvs();
      }
    }
    // The same segment one step later depends on what this unit just produced.
    if (v + segs < total) postSend(v + segs);
  }
  for (size_t i = 0; i < total; ++i) g.wait(sends[i]);
}

}  // namespace chorus::algo
