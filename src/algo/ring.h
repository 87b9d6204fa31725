// Pipelined ring: reduce-scatter, all-gather, or both (= all-reduce), in segments, so that
// sending, receiving and reducing overlap (the idea and the why are at the top of ring.cc).
#pragma once

#include "algo/group.h"
#include "reduce/reduce.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace chorus::algo {

// Which way data travels round the ring.
enum class RingDirection {
  kForward,   // to rank + 1
  kBackward,  // to rank - 1
};

// What one ring computes, and in which buffers. The buffers are seen as size() blocks
// (balancedBlock of totalCount, or equal blocks of blockCount when blockCount != 0). Made by the
// named constructors, one per collective, which place this rank's block (`own`) where the
// collective needs it.
struct RingSpec {
  // The whole reduced buffer on every rank, in out (in == out: in place). Blocks are balanced
  // over g.size.
  // wire: a reduced-precision wire format (f32 with sum or avg only; see RingSpec::wire).
  static RingSpec allReduce(const Group& g, const void* in, void* out, size_t count, DataType dtype,
                            ReduceOp op, RingDirection direction = RingDirection::kForward,
                            WireFormat wire = WireFormat::kNative);
  // Balanced blocks of `count` elements; out (the size of in, in == out allowed) takes the
  // partial sums, and this rank's reduced block ends at its own place in out.
  static RingSpec reduceScatter(const Group& g, const void* in, void* out, size_t count,
                                DataType dtype, ReduceOp op);
  // Equal blocks of blockCount elements: the partial sums go to `partials` (g.size blocks), and
  // this rank's reduced block to `own` (one block, anywhere).
  static RingSpec reduceScatterBlocks(const Group& g, const void* in, void* partials, void* own,
                                      size_t blockCount, DataType dtype, ReduceOp op);
  // Balanced blocks of `count` elements in out; this rank's block is already at its place.
  static RingSpec allGather(const Group& g, void* out, size_t count, DataType dtype);
  // Equal blocks of blockCount elements in out; this rank's block is already at its place.
  static RingSpec allGatherBlocks(const Group& g, void* out, size_t blockCount, DataType dtype);

  const uint8_t* in = nullptr;  // reduce phase: every rank's contribution, all blocks
  uint8_t* acc = nullptr;       // where partial sums and gathered blocks are written
  uint8_t* own = nullptr;       // where this rank's fully reduced block goes
  size_t totalCount = 0;        // elements over all blocks
  size_t blockCount = 0;        // if non-zero, every block has exactly this many elements
  DataType dtype = DataType::kU8;
  ReduceOp op = ReduceOp::kSum;
  bool reduce = true;  // run the reduce-scatter phase
  bool gather = true;  // run the all-gather phase
  // Travel the ring the other way round: data goes to rank - 1. Position p on the reversed ring
  // is rank (size - p) % size, and blocks are numbered by position, so `own` is the block of
  // position (size - rank) % size.
  bool reverse = false;
  // All-reduce of f32 only: what travels is this format. Each rank encodes a partial sum once
  // when it sends it and adds what it receives in f32; the owner of a block rounds its reduced
  // value once (after avg's division), keeps the decoded value, and the all-gather forwards the
  // owner's encoded bytes unchanged, so every rank ends with the same bits. Segments are
  // wireSegmentElems values (int8 blocks start at each segment's first value).
  WireFormat wire = WireFormat::kNative;
};

// Values per ring segment with a wire format: segmentBytes of wire bytes, rounded down to whole
// int8 blocks (256 values and their 4-byte scale), at least one value or block.
inline size_t wireSegmentElems(WireFormat w, size_t segmentBytes) {
  if (w == WireFormat::kInt8Block) return std::max<size_t>(1, segmentBytes / 260) * 256;
  return std::max<size_t>(1, segmentBytes / 2);
}

// Runs the ring to completion on the calling thread.
void ringRun(const Group& g, const RingSpec& spec);

// All-reduce as two rings at once over the two halves of the buffer, one in each direction, so
// that every rank sends to both neighbours and receives from both: two independent pipelines.
// Needs size >= 3 (with two ranks both rings would share one peer in each direction).
void bidirectionalRingAllReduce(const Group& g, const void* in, void* out, size_t count,
                                DataType dtype, ReduceOp op, WireFormat wire = WireFormat::kNative);

// For a thread that drives several RingTasks at once: when none of them can advance it polls the
// transport, and once g.timeout has passed without progress it lets the transport fail naming
// the peer that `blocker` waits for.
class StallWatch {
 public:
  explicit StallWatch(const Group& g) : g_(g), since_(std::chrono::steady_clock::now()) {}
  void progressed() { since_ = std::chrono::steady_clock::now(); }
  void idle(transport::Request& blocker) const {
    if (std::chrono::steady_clock::now() - since_ > g_.timeout) {
      g_.tx->wait(blocker, Deadline::after(std::chrono::milliseconds(0)));
    }
    g_.tx->pollStuckOn(blocker, Deadline::after(std::chrono::milliseconds(100)));
  }

 private:
  const Group& g_;
  std::chrono::steady_clock::time_point since_;
};

// The same ring as a task that advances without blocking, so that rings over groups with
// disjoint peers (a host's ranks, and the ranks that link hosts) run interleaved on one thread.
// Uses g.scratch for its plan, requests and reduction slots: tasks that run at the same time need
// different Scratch objects.
class RingTask {
 public:
  RingTask(const Group& g, const RingSpec& spec);
  // Handles every receive that has arrived, in order, and posts what depends on it (the first
  // call posts the initial window). Returns true when it did anything.
  bool advance();
  bool done() const { return finished_; }
  // The request the task needs next (for a blocking wait or a timeout message).
  transport::Request& blocker();

 private:
  using Unit = RingUnit;
  void postRecvs();
  void postSend(size_t i);
  void finishWireUnit(Unit& u);

  Group g_;
  RingSpec s_;
  size_t esize_ = 1;
  size_t segs_ = 1;
  size_t total_ = 0;
  int prev_ = 0, next_ = 0;
  size_t slotBytes_ = 0;
  int window_ = 2;
  uint8_t* slots_ = nullptr;
  Unit* units_ = nullptr;  // all three live in g.scratch
  transport::Request* sends_ = nullptr;
  transport::Request* recvs_ = nullptr;
  reduce::ReduceFn fn_ = nullptr;
  bool started_ = false;
  bool finished_ = false;
  size_t v_ = 0;  // next unit to complete
  size_t nextRecv_ = 0;
  int slotsInUse_ = 0, nextSlot_ = 0;
  // The transport reduces each received piece straight into place (no slots).
  bool reduceOnReceive_ = false;
  size_t sendsChecked_ = 0;  // sends known complete, in order, once all units are through
  bool wired_ = false;       // s_.wire is not kNative
};

}  // namespace chorus::algo
