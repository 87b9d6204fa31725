// The scheduler of the virtual world: it runs every rank's fiber in the order of simulated time,
// one at a time on the calling thread, until all return, one fails, or none can make progress
// (then it reports what each rank waits for). The world's parts live beside it: world_setup.cc
// builds it, virtual_transport.cc moves the messages, event_queue.h orders the events,
// stack_pool.h and fault_handler.h hold the fibers' memory.
#include "sim/virtual_world.h"

#include "sim/world_impl.h"

#include <chorus/error.hpp>

#include <boost/context/fiber.hpp>

#include <algorithm>
#include <chrono>
#include <string>

namespace chorus::sim {

namespace ctx = boost::context;
using transport::Request;

thread_local VirtualWorld::Impl* t_world = nullptr;  // the world whose run() is on this thread

std::string VirtualWorld::Impl::deadlockReport() {
  std::string s = "deadlock: no rank can make progress";
  int blocked = 0, shown = 0;
  for (int r = 0; r < n; ++r) {
    const Rank& k = ranks[static_cast<size_t>(r)];
    if (k.finished) continue;
    ++blocked;
    if (shown < 16) {
      s += "\n  " + describeWait(k);
      ++shown;
    }
  }
  if (blocked > shown) s += "\n  ... and " + std::to_string(blocked - shown) + " more rank(s)";
  s += unreceivedReport(16);
  return s;
}

void VirtualWorld::Impl::resetQueues() {
  // Requests in the queues may belong to frames that are gone: drop the pointers unread.
  for (Channel& c : channels.all()) {
    c.head = c.tail = nullptr;
    c.recvHead = c.recvTail = nullptr;
  }
  pool.reset();
  queued = 0;
  heap.clear();
}

void VirtualWorld::Impl::schedule() {
  const auto started = std::chrono::steady_clock::now();
  uint64_t rounds = 0;
  while (!heap.empty() && !failed) {
    if (cfg.wallLimitSeconds > 0 && (++rounds & 0xFFFFF) == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() >
            cfg.wallLimitSeconds) {
      fail("stopped after the wall-clock limit of " + std::to_string(cfg.wallLimitSeconds) +
           " s (simulated time reached " + std::to_string(toSeconds(now())) + " s)");
      break;
    }
    const Event e = heap.pop();
    Rank& k = ranks[static_cast<size_t>(e.rank)];
    if (e.req != nullptr) {
      e.req->state = Request::State::kDone;
      --k.pending;
      ++events;
      if (k.blockedOn != e.req && k.blockedOn != &pollMarker) continue;
    }
    if (k.finished) continue;
    k.blockedOn = nullptr;
    k.clock = std::max(k.clock, e.time);
    if (timed && !heap.empty() && k.clock > heap.top()) {
      push(k.clock, nullptr, k.index);  // its clock ran ahead while it waited: later, in order
      continue;
    }
    switchTo(k);
  }
}

RunResult VirtualWorld::Impl::run(const std::function<void(int)>& body) {
  if (t_world != nullptr) throw Error(ErrorCode::kInternal, "chorus sim: nested run()");
  t_world = this;
  failed = false;
  error.clear();
  messages = events = 0;
  std::fill(egressFree.begin(), egressFree.end(), 0);
  std::fill(ingressFree.begin(), ingressFree.end(), 0);
  std::fill(coreFree.begin(), coreFree.end(), 0);
  try {
    start(body);
    schedule();
  } catch (const std::exception& e) {  // the world's own bookkeeping (std::bad_alloc)
    const char* what = e.what();
    failSafely([what] { return std::string("chorus sim: ") + what; });
  }
  return finish();
}

void VirtualWorld::Impl::start(const std::function<void(int)>& body) {
  for (int r = 0; r < n; ++r) {
    Rank& k = ranks[static_cast<size_t>(r)];
    k.clock = cfg.startDelay.empty() ? 0 : toPs(cfg.startDelay[static_cast<size_t>(r)]);
    k.shmFree = 0;
    k.blockedOn = nullptr;
    k.finished = false;
    k.started = false;
    k.fakeStack = nullptr;
    k.pending = 0;
    k.self = ctx::fiber(
        std::allocator_arg, PooledStack{stacks.get()}, [this, &k, &body](ctx::fiber&& caller) {
          k.caller = std::move(caller);
          k.started = true;
          enterFiber(k);
          if (unwinding) {  // the run failed before this rank got to run
            k.finished = true;
            leaveFiber(k, true);
            return std::move(k.caller);
          }
          try {
            body(k.index);
            if (k.pending != 0) {
              fail("rank " + std::to_string(k.index) + " returned with " +
                   std::to_string(k.pending) +
                   " request(s) still pending (every request must be waited for)");
            }
          } catch (const ctx::detail::forced_unwind&) {
            leaveFiber(k, true);
            throw;  // the world unwinds this fiber
          } catch (const std::exception& e) {
            const char* what = e.what();
            failSafely([&k, what] { return "rank " + std::to_string(k.index) + ": " + what; });
          } catch (...) {
            failSafely([&k] { return "rank " + std::to_string(k.index) + ": unknown exception"; });
          }
          k.finished = true;
          leaveFiber(k, true);
          return std::move(k.caller);
        });
    k.stackLow = static_cast<uint8_t*>(stacks->last().sp) - stacks->last().size;
    k.stackSize = stacks->last().size;
    push(k.clock, nullptr, r);
  }
}

RunResult VirtualWorld::Impl::finish() {
  bool allDone = true;
  for (int r = 0; r < n; ++r) allDone = allDone && ranks[static_cast<size_t>(r)].finished;
  // The reports read the blocked ranks' requests: before the fibers unwind.
  if (!failed && !allDone) failSafely([this] { return deadlockReport(); });
  if (!failed && queued != 0) {
    failSafely([this] { return "messages left over:" + unreceivedReport(16); });
  }

  resetQueues();
  unwinding = true;
  for (int r = 0; r < n; ++r) destroyFiber(ranks[static_cast<size_t>(r)]);
  unwinding = false;
  t_world = nullptr;

  RunResult res;  // the failed run's memory is back: allocating is safe again
  res.finishTime.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    res.finishTime[static_cast<size_t>(r)] = toSeconds(ranks[static_cast<size_t>(r)].clock);
    res.seconds = std::max(res.seconds, res.finishTime[static_cast<size_t>(r)]);
  }
  res.messages = messages;
  res.events = events;
  res.ok = !failed;
  res.error = error;
  if (failed && error.empty() && outOfMemory) {
    res.error = "std::bad_alloc (memory ran out while the failure was reported)";
  }
  outOfMemory = false;
  return res;
}

VirtualWorld::VirtualWorld(WorldConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
VirtualWorld::~VirtualWorld() = default;
int VirtualWorld::size() const { return impl_->n; }
const WorldConfig& VirtualWorld::config() const { return impl_->cfg; }
const algo::Group& VirtualWorld::group(int rank) const {
  return impl_->ranks[static_cast<size_t>(rank)].group;
}
bool VirtualWorld::layered() const { return impl_->layered; }
bool VirtualWorld::oneHost() const { return impl_->oneHost; }
RunResult VirtualWorld::run(const std::function<void(int)>& body) { return impl_->run(body); }
uint8_t* VirtualWorld::untouchable(size_t bytes) { return reserveUntouchable(bytes); }

}  // namespace chorus::sim
