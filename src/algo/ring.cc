// Pipelined ring collectives: reduce-scatter, all-gather, and all-reduce as the one followed by
// the other. The ranks form a ring (rank r sends to r + 1 and receives from r - 1) and the
// buffer is cut into size() blocks. In each reduce-scatter step every rank passes the partial sum
// of one block on to its successor, which adds its own contribution; after size - 1 steps every
// block has been through every rank, and each rank holds one block fully reduced. The all-gather
// then passes the finished blocks round the ring for size - 1 more steps (which block moves when
// is ring_pattern.h's arithmetic). Every rank sends and receives 2 (size - 1) / size of the
// buffer, the least an all-reduce can, at the price of 2 (size - 1) latencies: the ring is the
// algorithm for large buffers, and the building block of the hierarchical all-reduce.
//
// Why segments: each block is cut into pieces of Group::segmentBytes, and a piece moves on to the
// next step as soon as it has arrived and been reduced, so sending, receiving and reducing
// overlap instead of taking turns; a window of reduction slots bounds the memory that received
// pieces wait in. RingTask advances without blocking, so that several rings run interleaved on
// one thread: the two halves of the bidirectional all-reduce, which go round opposite ways so
// that a pipeline waiting for a slow neighbour leaves the other one busy (docs/algorithms.md), and
// the local and cross-host rings of the hierarchical all-reduce.
#include "algo/ring.h"

#include "algo/ring_pattern.h"
#include "reduce/internal_types.h"
#include "reduce/wire.h"

#include <chorus/error.hpp>

#include <algorithm>
#include <cstring>
#include <optional>

namespace chorus::algo {

namespace {

// Where g.rank sits on a ring that runs `direction`: blocks are numbered by position.
int positionOf(const Group& g, RingDirection direction) {
  return direction == RingDirection::kBackward ? ringMod(-g.rank, g.size) : g.rank;
}

}  // namespace

RingSpec RingSpec::allReduce(const Group& g, const void* in, void* out, size_t count,
                             DataType dtype, ReduceOp op, RingDirection direction,
                             WireFormat wire) {
  RingSpec s;
  s.wire = wire;
  s.in = static_cast<const uint8_t*>(in);
  s.acc = static_cast<uint8_t*>(out);
  s.own = s.acc + balancedBlock(count, g.size, positionOf(g, direction)).offset *
                      reduce::elementSize(dtype);
  s.totalCount = count;
  s.dtype = dtype;
  s.op = op;
  s.reverse = direction == RingDirection::kBackward;
  return s;
}

RingSpec RingSpec::reduceScatter(const Group& g, const void* in, void* out, size_t count,
                                 DataType dtype, ReduceOp op) {
  RingSpec s = allReduce(g, in, out, count, dtype, op);
  s.gather = false;
  return s;
}

RingSpec RingSpec::reduceScatterBlocks(const Group& g, const void* in, void* partials, void* own,
                                       size_t blockCount, DataType dtype, ReduceOp op) {
  RingSpec s;
  s.in = static_cast<const uint8_t*>(in);
  s.acc = static_cast<uint8_t*>(partials);
  s.own = static_cast<uint8_t*>(own);
  s.blockCount = blockCount;
  s.totalCount = blockCount * static_cast<size_t>(g.size);
  s.dtype = dtype;
  s.op = op;
  s.gather = false;
  return s;
}

RingSpec RingSpec::allGather(const Group& g, void* out, size_t count, DataType dtype) {
  RingSpec s = allReduce(g, nullptr, out, count, dtype, ReduceOp::kSum);
  s.reduce = false;
  return s;
}

RingSpec RingSpec::allGatherBlocks(const Group& g, void* out, size_t blockCount, DataType dtype) {
  RingSpec s;
  s.acc = static_cast<uint8_t*>(out);
  s.own = s.acc + blockCount * reduce::elementSize(dtype) * static_cast<size_t>(g.rank);
  s.blockCount = blockCount;
  s.totalCount = blockCount * static_cast<size_t>(g.size);
  s.dtype = dtype;
  s.reduce = false;
  return s;
}

RingTask::RingTask(const Group& g, const RingSpec& s) : g_(g), s_(s) {
  const int n = g.size;
  const int r = s.reverse ? ringMod(-g.rank, n) : g.rank;  // position on the ring
  esize_ = reduce::elementSize(s.dtype);
  auto block = [&](int i) {
    return s.blockCount ? Block{static_cast<size_t>(i) * s.blockCount, s.blockCount}
                        : balancedBlock(s.totalCount, n, i);
  };
  size_t maxBlock = block(0).count;  // block 0 is never smaller than the others
  wired_ = s.wire != WireFormat::kNative;
  if (wired_ && (s.dtype != DataType::kF32 || !s.reduce || !s.gather)) {
    throw Error(ErrorCode::kInternal, "ring: a wire format needs an f32 all-reduce");
  }
  size_t segElems = wired_ ? wireSegmentElems(s.wire, g.segmentBytes)
                           : std::max<size_t>(1, g.ringSegmentBytes(maxBlock * esize_) / esize_);
  segs_ = std::max<size_t>(1, (maxBlock + segElems - 1) / segElems);
  // With a wire format every (block, segment) has a place in one buffer of wire bytes: what is
  // sent is encoded there, and what the all-gather receives lands there and is forwarded as is.
  const size_t wireSeg = wired_ ? reduce::wireBytes(s.wire, segElems) : 0;
  uint8_t* wireBuf = wired_ ? g.scratch->bytes(wireSeg * segs_ * static_cast<size_t>(n)) : nullptr;
  auto wireAt = [&](int b, size_t k) {
    return wireBuf + (static_cast<size_t>(b) * segs_ + k) * wireSeg;
  };
  int rsSteps = s.reduce ? n - 1 : 0;
  int agSteps = s.gather ? n - 1 : 0;
  total_ = static_cast<size_t>(rsSteps + agSteps) * segs_;
  if (total_ == 0) {
    finished_ = true;
    return;
  }

  // Plan every unit (step t, segment k) up front: pure arithmetic, no I/O.
  units_ = g.scratch->ringUnits(total_).data();
  for (int t = 0; t < rsSteps + agSteps; ++t) {
    bool rs = t < rsSteps;
    int ta = t - rsSteps;
    int sb = rs ? ringRsSendBlock(r, n, t) : ringAgSendBlock(r, n, ta);
    int rb = rs ? ringRsRecvBlock(r, n, t) : ringAgRecvBlock(r, n, ta);
    Block sblk = block(sb), rblk = block(rb);
    for (size_t k = 0; k < segs_; ++k) {
      Unit& u = units_[static_cast<size_t>(t) * segs_ + k];
      size_t k0 = k * segElems;
      size_t sc = sblk.count > k0 ? std::min(segElems, sblk.count - k0) : 0;
      size_t rc = rblk.count > k0 ? std::min(segElems, rblk.count - k0) : 0;
      size_t soff = (sblk.offset + k0) * esize_, roff = (rblk.offset + k0) * esize_;
      u.reducing = rs;
      u.last = rs && t == rsSteps - 1;
      u.sendBytes = wired_ ? reduce::wireBytes(s.wire, sc) : sc * esize_;
      u.recvBytes = wired_ ? reduce::wireBytes(s.wire, rc) : rc * esize_;
      u.sendCount = sc;
      u.recvCount = rc;
      if (wired_) {
        u.wireSend = wireAt(sb, k);
        u.wireRecv = wireAt(rb, k);
      }
      if (rs) {
        u.src = (t == 0 ? s.in : s.acc) + soff;
        u.dst = (u.last ? s.own + k0 * esize_ : s.acc + roff);
        u.mine = s.in + roff;
      } else {
        u.src = (ta == 0 ? s.own + k0 * esize_ : s.acc + soff);
        u.dst = s.acc + roff;
      }
    }
  }

  auto rankAt = [&](int pos) { return s.reverse ? ringMod(-pos, n) : ringMod(pos, n); };
  prev_ = rankAt(r - 1);
  next_ = rankAt(r + 1);
  slotBytes_ = wired_ ? wireSeg : segElems * esize_;
  window_ = static_cast<int>(std::clamp<size_t>((8u << 20) / slotBytes_, 2, 16));
  fn_ = s.reduce ? reduce::reduceFn(s.dtype, s.op) : nullptr;
  // A wire format decodes what arrives before adding it: it needs the bytes in a slot.
  reduceOnReceive_ = fn_ && !wired_ && g.tx->reducesOnReceive(prev_);
  slots_ = s.reduce && !reduceOnReceive_
               ? g.scratch->second(slotBytes_ * static_cast<size_t>(window_))
               : nullptr;
  sends_ = g.scratch->sends(total_).data();
  recvs_ = g.scratch->recvs(total_).data();
}

void RingTask::postRecvs() {
  while (nextRecv_ < total_) {
    Unit& u = units_[nextRecv_];
    if (u.recvBytes > 0) {
      if (u.reducing && reduceOnReceive_) {
        g_.tx->postRecvReduce(recvs_[nextRecv_], prev_, u.dst, u.mine, u.recvBytes,
                              static_cast<uint32_t>(nextRecv_), fn_, esize_);
      } else if (u.reducing) {
        if (slotsInUse_ == window_) return;
        u.slot = nextSlot_;
        nextSlot_ = (nextSlot_ + 1) % window_;
        ++slotsInUse_;
        g_.tx->postRecv(recvs_[nextRecv_], prev_, slots_ + slotBytes_ * static_cast<size_t>(u.slot),
                        u.recvBytes, static_cast<uint32_t>(nextRecv_));
      } else {
        g_.tx->postRecv(recvs_[nextRecv_], prev_, wired_ ? u.wireRecv : u.dst, u.recvBytes,
                        static_cast<uint32_t>(nextRecv_));
      }
    }
    ++nextRecv_;
  }
}

void RingTask::postSend(size_t i) {
  Unit& u = units_[i];
  if (u.sendBytes == 0) return;
  if (!wired_) {
    g_.tx->postSend(sends_[i], next_, u.src, u.sendBytes, static_cast<uint32_t>(i));
    return;
  }
  // A partial sum is rounded as it leaves; the all-gather forwards the owner's bytes as they are.
  if (u.reducing) {
    reduce::wireEncode(s_.wire, u.wireSend, reinterpret_cast<const float*>(u.src), u.sendCount);
  }
  g_.tx->postSend(sends_[i], next_, u.wireSend, u.sendBytes, static_cast<uint32_t>(i));
}

// A received unit with a wire format: add the partial sum to this rank's values, or (all-gather)
// decode the owner's bytes into place. The owner rounds its reduced block once and keeps the
// decoded value, which every other rank decodes from the same bytes.
void RingTask::finishWireUnit(Unit& u) {
  auto* dst = reinterpret_cast<float*>(u.dst);
  if (!u.reducing) {
    reduce::wireDecode(s_.wire, dst, u.wireRecv, u.recvCount);
    return;
  }
  const auto* slot = slots_ + slotBytes_ * static_cast<size_t>(u.slot);
  reduce::wireDecodeAdd(s_.wire, dst, reinterpret_cast<const float*>(u.mine), slot, u.recvCount);
  if (!u.last) return;
  if (s_.op == ReduceOp::kAvg) reduce::divide(dst, u.recvCount, DataType::kF32, g_.size);
  reduce::wireEncode(s_.wire, u.wireRecv, dst, u.recvCount);
  reduce::wireDecode(s_.wire, dst, u.wireRecv, u.recvCount);
}

bool RingTask::advance() {
  if (finished_) return false;
  bool progressed = false;
  if (!started_) {
    started_ = true;
    progressed = true;
    postRecvs();
    for (size_t i = 0; i < std::min(segs_, total_); ++i) postSend(i);
  }
  while (v_ < total_) {
    Unit& u = units_[v_];
    if (u.recvBytes > 0) {
      if (recvs_[v_].state == transport::Request::State::kPending) break;
      if (wired_) {
        finishWireUnit(u);
        if (u.reducing) {
          --slotsInUse_;
          postRecvs();
        }
      } else if (u.reducing) {
        size_t count = u.recvBytes / esize_;
        if (!reduceOnReceive_) {
          fn_(u.dst, u.mine, slots_ + slotBytes_ * static_cast<size_t>(u.slot), count);
        }
        if (u.last && s_.op == ReduceOp::kAvg) reduce::divide(u.dst, count, s_.dtype, g_.size);
        if (!reduceOnReceive_) {
          --slotsInUse_;
          postRecvs();
        }
      }
    }
    // The same segment one step later depends on what this unit just produced.
    if (v_ + segs_ < total_) postSend(v_ + segs_);
    ++v_;
    progressed = true;
  }
  if (v_ < total_) return progressed;
  while (sendsChecked_ < total_ &&
         sends_[sendsChecked_].state != transport::Request::State::kPending) {
    ++sendsChecked_;
  }
  if (sendsChecked_ == total_) {
    finished_ = true;
    progressed = true;
  }
  return progressed;
}

transport::Request& RingTask::blocker() {
  if (v_ < total_) return recvs_[v_];
  return sends_[std::min(sendsChecked_, total_ - 1)];
}

void ringRun(const Group& g, const RingSpec& s) {
  RingTask task(g, s);
  while (!task.done()) {
    if (!task.advance()) g.wait(task.blocker());
  }
}

void bidirectionalRingAllReduce(const Group& g, const void* in, void* out, size_t count,
                                DataType dtype, ReduceOp op, WireFormat wire) {
  if (g.size < 3) {
    throw Error(ErrorCode::kInternal, "bidirectional ring needs at least 3 ranks");
  }
  const size_t esize = reduce::elementSize(dtype);
  // Two halves: the first goes to rank + 1, the second to rank - 1.
  const size_t firstCount = (count + 1) / 2;
  const size_t counts[2] = {firstCount, count - firstCount};
  const size_t offsets[2] = {0, firstCount};
  Group reversed = g;
  reversed.scratch = &g.scratch->sibling();
  std::optional<RingTask> tasks[2];
  for (int d = 0; d < 2; ++d) {
    tasks[d].emplace(
        d == 0 ? g : reversed,
        RingSpec::allReduce(g, static_cast<const uint8_t*>(in) + offsets[d] * esize,
                            static_cast<uint8_t*>(out) + offsets[d] * esize, counts[d], dtype, op,
                            d == 0 ? RingDirection::kForward : RingDirection::kBackward, wire));
  }
  StallWatch stall(g);
  while (!tasks[0]->done() || !tasks[1]->done()) {
    bool progressed = false;
    for (auto& t : tasks) progressed |= t->advance();
    if (progressed) {
      stall.progressed();
      continue;
    }
    RingTask& waiting = tasks[0]->done() ? *tasks[1] : *tasks[0];
    if (tasks[0]->done() || tasks[1]->done()) {
      g.wait(waiting.blocker());  // one pipeline left: an ordinary wait
      continue;
    }
    stall.idle(waiting.blocker());
  }
}

}  // namespace chorus::algo
