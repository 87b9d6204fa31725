// What an algorithm sees: its rank, the group size, the transport, scratch memory and deadlines.
#pragma once

#include "common/op_desc.h"
#include "transport/data_path.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace chorus::algo {

// One (step, segment) of a ring: what to send and where what arrives goes (algo/ring.cc).
struct RingUnit {
  bool reducing;       // reduce-scatter step (receive into a slot, then reduce)
  bool last;           // last reduce-scatter step: the result is final
  const uint8_t* src;  // what this unit sends
  size_t sendBytes;
  uint8_t* dst;         // reduce: where a op slot goes; gather: where the bytes land
  const uint8_t* mine;  // reduce: this rank's contribution to the received segment
  size_t recvBytes;
  int slot;
  // Reduced-precision wire format (RingSpec::wire): the values each message carries, and where
  // in the wire buffer the unit's outgoing and incoming segments are encoded.
  size_t sendCount;
  size_t recvCount;
  uint8_t* wireSend;
  uint8_t* wireRecv;
};

// Memory reused from call to call: a fresh large buffer per call costs a page fault per 4 KiB,
// and no allocation happens per call once the sizes have been seen.
class Scratch {
 public:
  // The simulator without payloads (src/sim) hands out addresses that nobody may touch instead of
  // memory: reserve(n) returns n bytes of them.
  using Reserve = uint8_t* (*)(size_t n);
  void reserveFrom(Reserve reserve) { reserve_ = reserve; }

  uint8_t* bytes(size_t n) {
    if (reserve_ != nullptr) [[unlikely]]
      return reserve_(n);
    if (n > capacity_) {
      buffer_.reset(new uint8_t[n]);  // uninitialised on purpose
      capacity_ = n;
    }
    return buffer_.get();
  }
  uint8_t* second(size_t n) {
    if (reserve_ != nullptr) [[unlikely]]
      return reserve_(n);
    if (n > capacity2_) {
      buffer2_.reset(new uint8_t[n]);
      capacity2_ = n;
    }
    return buffer2_.get();
  }
  // Request arrays: resized only between collectives, so pending requests never move.
  std::vector<transport::Request>& sends(size_t n) { return sized(sends_, n); }
  std::vector<transport::Request>& recvs(size_t n) { return sized(recvs_, n); }
  // A second Scratch for a task that runs alongside one that uses this one.
  Scratch& sibling() {
    if (!sibling_) {
      sibling_ = std::make_unique<Scratch>();
      sibling_->reserve_ = reserve_;
    }
    return *sibling_;
  }
  // Block sizes or offsets (elements) of the collectives with per-rank counts; kept apart from
  // sizes2 so that an algorithm built on another (ring_gather on the variable ring) has its own.
  std::vector<size_t>& sizes(size_t n) {
    sizes_.resize(n);
    return sizes_;
  }
  std::vector<size_t>& sizes2(size_t n) {
    sizes2_.resize(n);
    return sizes2_;
  }
  std::vector<RingUnit>& ringUnits(size_t n) {
    ringUnits_.assign(n, RingUnit{});
    return ringUnits_;
  }

 private:
  static std::vector<transport::Request>& sized(std::vector<transport::Request>& v, size_t n) {
    v.assign(n, transport::Request{});
    return v;
  }
  Reserve reserve_ = nullptr;
  std::unique_ptr<uint8_t[]> buffer_;
  size_t capacity_ = 0;
  std::unique_ptr<uint8_t[]> buffer2_;
  size_t capacity2_ = 0;
  std::vector<transport::Request> sends_;
  std::vector<transport::Request> recvs_;
  std::vector<RingUnit> ringUnits_;
  std::vector<size_t> sizes_;
  std::vector<size_t> sizes2_;
  std::unique_ptr<Scratch> sibling_;
};

struct Hierarchy;
class SharedMemoryAccess;

struct Group {
  int rank = 0;
  int size = 1;
  transport::DataPath* tx = nullptr;
  Scratch* scratch = nullptr;
  std::chrono::milliseconds timeout{300000};
  size_t segmentBytes = 512 * 1024;
  // Where the group spans hosts (its links leave the machine, as every rank of it knows alike):
  // the largest ring segment (Options::tcpSegmentBytes); 0: segmentBytes always.
  size_t tcpSegmentBytes = 0;
  // The segment of a ring whose largest block has `blockBytes`: segmentBytes, or over TCP about a
  // quarter of the block, between segmentBytes and tcpSegmentBytes.
  size_t ringSegmentBytes(size_t blockBytes) const {
    if (tcpSegmentBytes <= segmentBytes) return segmentBytes;
    return std::clamp(blockBytes / 4, segmentBytes, tcpSegmentBytes);
  }
  // Ring all-reduces from this size (and 3 ranks) run as two rings, one each way (0: never;
  // Tuning::ringBidirectionalBytes).
  size_t ringBidirectionalBytes = 0;
  // Subgroups by host, when the ranks span several hosts with several ranks on some of them.
  const Hierarchy* hier = nullptr;
  // Registered memory of this process and the peers' mapped buffers (algo/in_place.h); null
  // where collectives never run in place (the simulator).
  SharedMemoryAccess* shared = nullptr;

  // Each wait gets the full timeout: it bounds how long one step may stall, not a whole call.
  void wait(transport::Request& r) const {
    if (r.state == transport::Request::State::kPending) tx->wait(r, Deadline::after(timeout));
  }
};

// One collective call at byte level. in/out follow the C API's rules for desc.kind.
struct Args {
  Args() = default;
  Args(const OpDesc& d, const void* i, void* o) : desc(d), in(i), out(o) {}

  OpDesc desc;
  const void* in = nullptr;
  void* out = nullptr;
  // Per-rank element counts, one per rank (copied: a queued call does not depend on the
  // caller's array). all-gather-v / reduce-scatter-v: block r's size, in both lists' place
  // `counts`; all-to-all-v: what this rank sends to (counts) and receives from (recvCounts)
  // each rank. Empty for the other collectives.
  std::vector<size_t> counts;
  std::vector<size_t> recvCounts;
  // Send and receive (kSendRecv, whose description is the same for every message): the other
  // rank, the direction and the size in bytes.
  int peer = -1;
  bool sending = false;
  size_t bytes = 0;
};

}  // namespace chorus::algo
