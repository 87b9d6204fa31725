// What algorithms see of the network: tagged, ordered, non-blocking sends and receives to peers.
#pragma once

#include "common/deadline.h"
#include "common/op_desc.h"

#include <chorus/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::transport {

// Combines `count` elements: dst = a op b (the signature of the reduction kernels). dst may be a.
using CombineFn = void (*)(void* dst, const void* a, const void* b, size_t count);

// Completion of one posted send or receive. Owned by the caller, which keeps it alive and in
// place until it is done or the transport is aborted (no allocation per message).
struct Request {
  enum class State : uint8_t { kIdle, kPending, kDone };
  State state = State::kIdle;
  int peer = -1;
  uint32_t step = 0;
  uint8_t* data = nullptr;
  size_t bytes = 0;
  size_t moved = 0;         // payload bytes transferred so far
  Request* next = nullptr;  // intrusive FIFO link, owned by the transport while pending
  // A receive posted by postRecvReduce: the payload is combined with `mine` into data.
  CombineFn combine = nullptr;
  const uint8_t* mine = nullptr;
  uint32_t elementBytes = 0;

  bool done() const { return state == State::kDone; }
  // What every transport's postSend / postRecv records before queueing the request.
  void start(int toPeer, uint32_t atStep, const void* buffer, size_t size) {
    state = State::kPending;
    peer = toPeer;
    step = atStep;
    data = static_cast<uint8_t*>(const_cast<void*>(buffer));
    bytes = size;
    moved = 0;
    next = nullptr;
    combine = nullptr;
  }
};

// The data path, driven by one thread at a time (the communicator's worker). Messages to one
// peer are delivered in post order; a receive matches the next message from its peer, which must
// carry the same collective and step, or the call fails with kMismatch. Failures throw
// chorus::Error from post/wait. Algorithms, and views such as a subgroup's, need only this.
class DataPath {
 public:
  virtual ~DataPath() = default;

  // Starts collective `op`: later frames carry it, and frames that peers already sent for it are
  // checked against it.
  virtual void beginOp(const OpDesc& op) = 0;
  virtual void postSend(Request& r, int peer, const void* data, size_t bytes, uint32_t step) = 0;
  virtual void postRecv(Request& r, int peer, void* data, size_t bytes, uint32_t step) = 0;
  // Receive-with-reduce: when the message of `bytes` arrives, dst = fn(mine, payload), combined
  // straight from where the transport holds the payload, with no copy into a buffer first.
  // Offered only where reducesOnReceive(peer) says so; elementBytes must divide 64 (the payload
  // is combined in pieces of whole elements). dst may equal mine.
  virtual bool reducesOnReceive(int peer) const {
    (void)peer;
    return false;
  }
  virtual void postRecvReduce(Request& r, int peer, void* dst, const void* mine, size_t bytes,
                              uint32_t step, CombineFn fn, size_t elementBytes);
  // Drives I/O until r is done. Throws kTimeout if nothing completes it before the deadline.
  virtual void wait(Request& r, Deadline deadline) = 0;
  // Drives I/O once: returns after something happened or at the deadline (no error then).
  virtual void poll(Deadline deadline) = 0;
  // poll() for a caller that has several requests pending and is stuck on r: when a peer reports
  // that it gave up waiting for this rank, the error adds what this rank itself waits for (as
  // wait() does), so the rank that is really missing gets named.
  virtual void pollStuckOn(const Request& r, Deadline deadline) {
    (void)r;
    poll(deadline);
  }
  // Whether waits may poll before they sleep (the spin policy). Off for work that runs in the
  // background of the application's own computation, whose core the polling would take.
  virtual void allowSpinning(bool allowed) { (void)allowed; }

  // "127.0.0.1:40123" of a peer, for messages.
  virtual std::string peerAddress(int peer) const = 0;
  // "shm" or "tcp": how data to this peer travels.
  virtual const char* pathTo(int peer) const = 0;
  // Host id of every rank (Options::hostId): equal strings share a machine.
  virtual const std::vector<std::string>& hosts() const = 0;
};

inline void DataPath::postRecvReduce(Request& r, int peer, void* dst, const void* mine,
                                     size_t bytes, uint32_t step, CombineFn fn,
                                     size_t elementBytes) {
  (void)r, (void)peer, (void)dst, (void)mine, (void)bytes, (void)step, (void)fn;
  (void)elementBytes;
  throw Error(ErrorCode::kInternal, "receive-with-reduce is not offered on this data path");
}

}  // namespace chorus::transport
