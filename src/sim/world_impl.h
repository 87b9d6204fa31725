// The virtual world's state, shared by its parts: the ranks (each a fiber with its clock, its
// transport and its algorithm group), the channels between them, the event queue, and the costs
// of the network model. virtual_world.cc schedules the fibers; virtual_transport.cc moves and
// matches messages; world_setup.cc builds the world from its WorldConfig.
#pragma once

#include "algo/hierarchy.h"
#include "algo/topology.h"
#include "sim/channel_map.h"
#include "sim/event_queue.h"
#include "sim/fault_handler.h"
#include "sim/message_pool.h"
#include "sim/sim_time.h"
#include "sim/stack_pool.h"
#include "sim/virtual_transport.h"
#include "sim/virtual_world.h"
#include "transport/transport.h"

#include <chorus/error.hpp>

#include <boost/context/fiber.hpp>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define CHORUS_SIM_ASAN 1
#endif

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus::sim {

struct Rank {
  int index = 0;
  boost::context::fiber self;
  boost::context::fiber caller;
  const void* stackLow = nullptr;  // for AddressSanitizer's fiber annotations
  size_t stackSize = 0;
  void* fakeStack = nullptr;
  Time clock = 0;
  Time shmFree = 0;                         // the sender's own shared-memory link
  transport::Request* blockedOn = nullptr;  // or &Impl::pollMarker while it polls
  bool started = false;
  bool finished = false;
  int pending = 0;
  OpDesc op;
  bool opBegun = false;
  // Last channels used: a ring or a tree talks to few peers.
  int sendPeer = -1, recvPeer = -1;
  Channel* sendChan = nullptr;
  Channel* recvChan = nullptr;
  std::unique_ptr<VirtualTransport> tx;
  algo::Scratch scratch;
  algo::Group group;
  std::unique_ptr<algo::Hierarchy> hier;
};

struct VirtualWorld::Impl {
  using Request = transport::Request;

  explicit Impl(WorldConfig c);
  ~Impl() {
    // Fibers left suspended (a run interrupted by an exception) unwind without the transport.
    unwinding = true;
    resetQueues();
    for (int r = 0; ranks && r < n; ++r) destroyFiber(ranks[static_cast<size_t>(r)]);
  }

  // Transport entry points (called on the rank's fiber).
  void postSend(Rank& k, Request& r, int peer, const void* data, size_t bytes, uint32_t step);
  void postRecv(Rank& k, Request& r, int peer, void* data, size_t bytes, uint32_t step);
  void wait(Rank& k, Request& r);
  void poll(Rank& k);

  // Advances the running rank's clock by `ps` (the simulated-bytes kernels).
  void charge(double ps) {
    if (current == nullptr || unwinding) return;
    current->clock += static_cast<Time>(ps);
    syncTime(*current);
  }

  RunResult run(const std::function<void(int)>& body);
  void start(const std::function<void(int)>& body);
  void schedule();
  RunResult finish();

  void checkPeer(const Rank& k, int peer, const char* what) const {
    if (peer < 0 || peer >= n) {
      throw Error(ErrorCode::kInternal, std::string(what) + " to rank " + std::to_string(peer) +
                                            " of a group of " + std::to_string(n));
    }
    (void)k;
  }
  Channel& channel(int src, int dst) { return channels.get(src, dst); }
  void match(Rank& receiver, Message* m, Request& recv, int src, Time at);
  void completeAt(Request& r, Rank& owner, Time t);
  void push(Time t, Request* r, int rank) { heap.push(Event{t, r, rank}); }
  // Keeps events in time order: a rank whose clock ran past the next event lets it happen first.
  void syncTime(Rank& k) {
    if (timed && !heap.empty() && k.clock > heap.top()) {
      push(k.clock, nullptr, k.index);
      suspend(k);
    }
  }
  // Fiber switches, with AddressSanitizer told which stack runs (it cannot see them otherwise).
  void switchTo(Rank& k) {
    current = &k;
    setRunningRank(k.index);
    ++events;
    toFiber(k);
    k.self = std::move(k.self).resume();
    backFromFiber();
    current = nullptr;
    setRunningRank(-1);
  }
  // On k's fiber: back to the scheduler until resumed.
  void suspend(Rank& k) {
    leaveFiber(k, false);
    try {
      k.caller = std::move(k.caller).resume();
    } catch (const boost::context::detail::forced_unwind&) {
      enterFiber(k);
      throw;
    }
    enterFiber(k);
  }
  // An unfinished fiber unwinds its stack (running destructors) when destroyed; one that never
  // ran is started instead and returns at once (unwinding is set).
  void destroyFiber(Rank& k) {
    if (!k.self) return;
    if (!k.started) {
      switchTo(k);
      return;
    }
    toFiber(k);
    k.self = boost::context::fiber();
    backFromFiber();
  }
#if defined(CHORUS_SIM_ASAN)
  void toFiber(Rank& k) { __sanitizer_start_switch_fiber(&mainFake, k.stackLow, k.stackSize); }
  void backFromFiber() { __sanitizer_finish_switch_fiber(mainFake, nullptr, nullptr); }
  void enterFiber(Rank& k) {
    __sanitizer_finish_switch_fiber(k.fakeStack, &mainStackLow, &mainStackSize);
  }
  void leaveFiber(Rank& k, bool dying) {
    __sanitizer_start_switch_fiber(dying ? nullptr : &k.fakeStack, mainStackLow, mainStackSize);
  }
  void* mainFake = nullptr;
  const void* mainStackLow = nullptr;
  size_t mainStackSize = 0;
#else
  void toFiber(Rank&) {}
  void backFromFiber() {}
  void enterFiber(Rank&) {}
  void leaveFiber(Rank&, bool) {}
#endif
  Time now() { return heap.empty() ? 0 : heap.top(); }
  void fail(const std::string& why) {
    if (!failed) {
      failed = true;
      error = why;
    }
  }
  // From a handler: building the message may itself run out of memory.
  template <class MakeMessage>
  void failSafely(const MakeMessage& why) noexcept {
    try {
      fail(why());
    } catch (...) {
      failed = true;
      outOfMemory = true;
    }
  }
  std::string describeWait(const Rank& k);
  std::string deadlockReport();
  std::string unreceivedReport(size_t limit);
  void resetQueues();

  WorldConfig cfg;
  int n = 1;
  bool dry = false;
  bool timed = false;
  double shmBetaPs = 0, netBetaPs = 0, gammaPs = 0, copyPs = 0, coreBetaPs = 0;
  Time shmAlphaPs = 0, netAlphaPs = 0, overheadPs = 0;
  std::vector<std::string> hostIds;
  std::vector<int> hostIndex;
  bool layered = false, oneHost = true;
  std::unique_ptr<StackPool> stacks;  // outlives the ranks' fibers
  std::unique_ptr<Rank[]> ranks;
  std::shared_ptr<const algo::Topology> topo;
  ChannelMap channels;
  MessagePool pool;
  size_t queued = 0;  // messages in channels, not yet received
  EventQueue heap;
  std::vector<Time> egressFree, ingressFree;
  std::vector<Time> coreFree;  // the shared cores (Network::sharedCores), when modelled
  Rank* current = nullptr;
  Request pollMarker;  // Rank::blockedOn while a rank polls
  bool failed = false, unwinding = false, outOfMemory = false;
  std::string error;
  uint64_t messages = 0, events = 0;
};

// The world whose run() is on this thread (the dry-mode kernels charge its running rank).
extern thread_local VirtualWorld::Impl* t_world;

}  // namespace chorus::sim
