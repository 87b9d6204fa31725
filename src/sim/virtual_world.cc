#include "sim/virtual_world.h"

#include "algo/hierarchy.h"
#include "algo/topology.h"
#include "reduce/internal_types.h"
#include "transport/request_queue.h"

#include <chorus/error.hpp>

#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define CHORUS_SIM_ASAN 1
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>

namespace chorus::sim {

namespace ctx = boost::context;
using transport::Request;

namespace {

using Time = int64_t;  // picoseconds

#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kDefaultStackBytes = 512 * 1024;
#else
constexpr size_t kDefaultStackBytes = 64 * 1024;
#endif
// One guard mapping per rank costs two memory mappings (the kernel allows about 65k).
constexpr int kMaxGuardedRanks = 4096;
constexpr size_t kPage = 4096;

// ---- Memory nobody may touch, and a clear message when something does. ----

struct Range {
  uintptr_t begin = 0, end = 0;
};
constexpr int kMaxRanges = 64;
// Read by the signal handler: plain arrays, appended to before use.
Range g_untouchable[kMaxRanges];
int g_untouchableCount = 0;
Range g_stackRegions[kMaxRanges];
int g_stackRegionCount = 0;
volatile int g_currentRank = -1;
uint8_t* g_untouchableBase = nullptr;
size_t g_untouchableSize = 0;

void writeStr(const char* s) {
  ssize_t ignored = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)ignored;
}

void writeNum(long long v) {
  char buf[24];
  int i = sizeof(buf);
  bool neg = v < 0;
  unsigned long long u =
      neg ? static_cast<unsigned long long>(-v) : static_cast<unsigned long long>(v);
  buf[--i] = '\0';
  do {
    buf[--i] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (neg) buf[--i] = '-';
  writeStr(buf + i);
}

bool inRanges(const Range* ranges, int count, uintptr_t a) {
  for (int i = 0; i < count; ++i) {
    if (a >= ranges[i].begin && a < ranges[i].end) return true;
  }
  return false;
}

void onFault(int sig, siginfo_t* info, void*) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  if (inRanges(g_untouchable, g_untouchableCount, addr)) {
    writeStr("chorus sim: rank ");
    writeNum(g_currentRank);
    writeStr(
        " touched a payload in dry mode: some copy or reduction in the algorithms bypasses "
        "algo::copyBytes / reduce::reduceFn / reduce::divide\n");
  } else if (inRanges(g_stackRegions, g_stackRegionCount, addr)) {
    writeStr("chorus sim: rank ");
    writeNum(g_currentRank);
    writeStr(" overflowed its fiber stack (WorldConfig::stackBytes)\n");
  } else if (g_currentRank >= 0) {
    writeStr("chorus sim: fatal signal while rank ");
    writeNum(g_currentRank);
    writeStr(" ran\n");
  }
  signal(sig, SIG_DFL);  // returning re-runs the access, which now ends the process
}

void installFaultHandler() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  // The handler runs on its own stack: a fiber that overflowed has none left.
  static std::vector<uint8_t> altStack(64 * 1024);
  stack_t ss{};
  ss.ss_sp = altStack.data();
  ss.ss_size = altStack.size();
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = &onFault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
}

void addRange(Range* ranges, int& count, const void* p, size_t bytes) {
  const auto b = reinterpret_cast<uintptr_t>(p);
  for (int i = 0; i < count; ++i) {
    if (ranges[i].begin == ranges[i].end) {  // a free entry
      ranges[i] = Range{b, b + bytes};
      return;
    }
  }
  if (count == kMaxRanges) return;
  ranges[count] = Range{b, b + bytes};
  ++count;
}

void removeRange(Range* ranges, int count, const void* p) {
  const auto b = reinterpret_cast<uintptr_t>(p);
  for (int i = 0; i < count; ++i) {
    if (ranges[i].begin == b) ranges[i] = Range{};
  }
}

// Process-wide: Scratch::Reserve is a plain function. Grows by reserving a new, larger range;
// old ones stay reserved so that stale addresses still fault.
uint8_t* reserveUntouchable(size_t bytes) {
  bytes = std::max<size_t>(bytes, kPage);
  if (bytes > g_untouchableSize) {
    size_t want = std::max(bytes, 2 * g_untouchableSize);
    want = (want + kPage - 1) / kPage * kPage;
    void* p = mmap(nullptr, want, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      throw Error(ErrorCode::kSystem, "chorus sim: cannot reserve " + std::to_string(want) +
                                          " bytes of address space: " + std::strerror(errno));
    }
    g_untouchableBase = static_cast<uint8_t*>(p);
    g_untouchableSize = want;
    addRange(g_untouchable, g_untouchableCount, p, want);
  }
  return g_untouchableBase;
}

// ---- Fiber stacks: one mapping for all ranks, with guard pages while that is affordable. ----

class StackPool {
 public:
  StackPool(int count, size_t stackBytes, bool guard) {
    stride_ = (stackBytes + kPage - 1) / kPage * kPage + (guard ? kPage : 0);
    guardBytes_ = guard ? kPage : 0;
    bytes_ = stride_ * static_cast<size_t>(count);
    // Not MAP_NORESERVE: stacks count against the commit limit like any other memory, rather
    // than raising SIGSEGV on a later page when the machine runs short.
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      throw Error(ErrorCode::kSystem, "chorus sim: cannot map " + std::to_string(bytes_) +
                                          " bytes of fiber stacks: " + std::strerror(errno));
    }
    base_ = static_cast<uint8_t*>(p);
    for (int i = 0; i < count; ++i) {
      uint8_t* slot = base_ + stride_ * static_cast<size_t>(i);
      if (guard) mprotect(slot, kPage, PROT_NONE);  // the low end: stacks grow down
      free_.push_back(slot);
    }
    if (guard) addRange(g_stackRegions, g_stackRegionCount, base_, bytes_);
  }
  ~StackPool() {
    removeRange(g_stackRegions, g_stackRegionCount, base_);
    munmap(base_, bytes_);
  }
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  ctx::stack_context allocate() {
    if (free_.empty()) throw Error(ErrorCode::kInternal, "chorus sim: out of fiber stacks");
    uint8_t* slot = free_.back();
    free_.pop_back();
    ctx::stack_context sc;
    sc.size = stride_ - guardBytes_;
    sc.sp = slot + stride_;
    last_ = sc;
    return sc;
  }
  // The stack handed out last (AddressSanitizer is told about each fiber's stack).
  const ctx::stack_context& last() const { return last_; }
  void deallocate(ctx::stack_context& sc) noexcept {
    free_.push_back(static_cast<uint8_t*>(sc.sp) - stride_);
  }

 private:
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0, stride_ = 0, guardBytes_ = 0;
  std::vector<uint8_t*> free_;
  ctx::stack_context last_;
};

struct PooledStack {
  StackPool* pool;
  ctx::stack_context allocate() { return pool->allocate(); }
  void deallocate(ctx::stack_context& sc) noexcept { pool->deallocate(sc); }
};

// ---- Messages and the queues between ranks. ----

struct Message {
  Message* next = nullptr;
  Request* send = nullptr;  // kReal: the sender's request, completed when matched
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  Time arrival = 0;
  OpDesc op;
  bool opBegun = false;
  uint32_t step = 0;
};

// No allocation per message once the pool has grown to the largest number in flight.
class MessagePool {
 public:
  Message* get() {
    if (free_ == nullptr) grow();
    Message* m = free_;
    free_ = m->next;
    m->next = nullptr;
    return m;
  }
  void put(Message* m) {
    m->next = free_;
    free_ = m;
  }
  void reset() {
    free_ = nullptr;
    for (auto& chunk : chunks_) {
      for (size_t i = 0; i < kChunk; ++i) put(&chunk[i]);
    }
  }

 private:
  static constexpr size_t kChunk = 4096;
  void grow() {
    chunks_.emplace_back(new Message[kChunk]);
    for (size_t i = 0; i < kChunk; ++i) put(&chunks_.back()[i]);
  }
  std::vector<std::unique_ptr<Message[]>> chunks_;
  Message* free_ = nullptr;
};

struct Channel {
  int src = 0, dst = 0;
  Message* head = nullptr;  // sent, not yet received, in send order
  Message* tail = nullptr;
  Request* recvHead = nullptr;  // posted receives not yet matched, in post order
  Request* recvTail = nullptr;
};

// (src, dst) -> channel, open addressing: O(1) without a dense N x N table.
class ChannelMap {
 public:
  ChannelMap() { rehash(1024); }
  Channel& get(int src, int dst) {
    const uint64_t key = key_(src, dst);
    size_t i = slot(key);
    while (keys_[i] != 0) {
      if (keys_[i] == key) return *vals_[i];
      i = (i + 1) & mask_;
    }
    if ((count_ + 1) * 2 > keys_.size()) {
      rehash(keys_.size() * 2);
      return get(src, dst);
    }
    store_.emplace_back();
    Channel& c = store_.back();
    c.src = src;
    c.dst = dst;
    keys_[i] = key;
    vals_[i] = &c;
    ++count_;
    return c;
  }
  std::deque<Channel>& all() { return store_; }

 private:
  static uint64_t key_(int src, int dst) {
    return ((static_cast<uint64_t>(static_cast<uint32_t>(src)) << 32) |
            static_cast<uint32_t>(dst)) +
           1;  // 0 marks an empty slot
  }
  size_t slot(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_) & mask_;
  }
  void rehash(size_t capacity) {
    std::vector<uint64_t> oldKeys = std::move(keys_);
    std::vector<Channel*> oldVals = std::move(vals_);
    keys_.assign(capacity, 0);
    vals_.assign(capacity, nullptr);
    mask_ = capacity - 1;
    shift_ = 64 - __builtin_ctzll(capacity);
    for (size_t j = 0; j < oldKeys.size(); ++j) {
      if (oldKeys[j] == 0) continue;
      size_t i = slot(oldKeys[j]);
      while (keys_[i] != 0) i = (i + 1) & mask_;
      keys_[i] = oldKeys[j];
      vals_[i] = oldVals[j];
    }
  }
  std::vector<uint64_t> keys_;
  std::vector<Channel*> vals_;
  std::deque<Channel> store_;
  size_t mask_ = 0, count_ = 0;
  int shift_ = 0;
};

struct Event {
  Time time;
  Request* req;  // null: resume the rank; else: the request completes
  int rank;
};

// Events by time. Times never go below the last one taken (a rank acts at its clock, which is
// never behind the earliest pending event), so a radix heap fits: pushes are O(1), and each event
// moves down a few of 64 buckets before it is taken, in sequential passes instead of a binary
// heap's cache misses. Events of equal time come out in the order they were pushed (bucket 0 is
// a FIFO), which keeps runs deterministic.
class EventQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  void push(const Event& e) {
    buckets_[bucketOf(e.time)].push_back(e);
    ++size_;
  }
  // The earliest time; the queue must not be empty.
  Time top() {
    settle();
    return last_;
  }
  Event pop() {
    settle();
    --size_;
    Event e = buckets_[0][head_++];
    if (head_ == buckets_[0].size()) {
      buckets_[0].clear();
      head_ = 0;
    }
    return e;
  }
  void clear() {
    for (auto& b : buckets_) b.clear();
    head_ = 0;
    size_ = 0;
    last_ = 0;
  }

 private:
  int bucketOf(Time t) const {
    return t == last_ ? 0 : 64 - __builtin_clzll(static_cast<uint64_t>(t ^ last_));
  }
  // Makes bucket 0 hold the earliest events.
  void settle() {
    if (head_ < buckets_[0].size()) return;
    int i = 1;
    while (buckets_[i].empty()) ++i;
    std::vector<Event>& b = buckets_[i];
    Time m = b[0].time;
    for (const Event& e : b) m = std::min(m, e.time);
    last_ = m;
    for (const Event& e : b) buckets_[bucketOf(e.time)].push_back(e);  // all land below i
    b.clear();
  }
  std::vector<Event> buckets_[65];
  size_t head_ = 0;  // bucket 0 is taken from the front
  size_t size_ = 0;
  Time last_ = 0;
};

Request g_pollMarker;  // Rank::blockedOn while a rank polls

Time toPs(double seconds) { return static_cast<Time>(std::llround(seconds * 1e12)); }
double toSeconds(Time t) { return static_cast<double>(t) * 1e-12; }

}  // namespace

// ---- The world. ----

class VirtualTransport;

struct Rank {
  int index = 0;
  ctx::fiber self;
  ctx::fiber caller;
  const void* stackLow = nullptr;  // for AddressSanitizer's fiber annotations
  size_t stackSize = 0;
  void* fakeStack = nullptr;
  Time clock = 0;
  Time shmFree = 0;  // the sender's own shared-memory link
  Request* blockedOn = nullptr;
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
    g_currentRank = k.index;
    ++events;
    toFiber(k);
    k.self = std::move(k.self).resume();
    backFromFiber();
    current = nullptr;
    g_currentRank = -1;
  }
  // On k's fiber: back to the scheduler until resumed.
  void suspend(Rank& k) {
    leaveFiber(k, false);
    try {
      k.caller = std::move(k.caller).resume();
    } catch (const ctx::detail::forced_unwind&) {
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
    k.self = ctx::fiber();
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
  bool failed = false, unwinding = false, outOfMemory = false;
  std::string error;
  uint64_t messages = 0, events = 0;
};

namespace {

thread_local VirtualWorld::Impl* t_world = nullptr;  // the world whose run() is on this thread

void simReduce(void*, const void*, const void*, size_t count) {
  if (t_world) t_world->charge(t_world->gammaPs * static_cast<double>(count));
}
void simDivide(void*, size_t count, int) {
  if (t_world) t_world->charge(t_world->gammaPs * static_cast<double>(count));
}
void simCopy(void*, const void*, size_t bytes) {
  if (t_world) t_world->charge(t_world->copyPs * static_cast<double>(bytes));
}

}  // namespace

class VirtualTransport final : public transport::Transport {
 public:
  VirtualTransport(VirtualWorld::Impl* w, Rank* k) : w_(w), k_(k) {}
  void beginOp(const OpDesc& op) override {
    k_->op = op;
    k_->opBegun = true;
  }
  void postSend(Request& r, int peer, const void* data, size_t bytes, uint32_t step) override {
    w_->postSend(*k_, r, peer, data, bytes, step);
  }
  void postRecv(Request& r, int peer, void* data, size_t bytes, uint32_t step) override {
    w_->postRecv(*k_, r, peer, data, bytes, step);
  }
  void wait(Request& r, Deadline) override { w_->wait(*k_, r); }
  void poll(Deadline) override { w_->poll(*k_); }
  void interrupt() noexcept override {}
  void abort(const Error&) noexcept override {}
  void close() noexcept override {}
  std::string peerAddress(int peer) const override {
    return "virtual rank " + std::to_string(peer);
  }
  const char* pathTo(int peer) const override {
    return w_->hostIndex.at(static_cast<size_t>(peer)) ==
                   w_->hostIndex[static_cast<size_t>(k_->index)]
               ? "shm"
               : "tcp";
  }
  const std::vector<std::string>& hosts() const override { return w_->hostIds; }

 private:
  VirtualWorld::Impl* w_;
  Rank* k_;
};

VirtualWorld::Impl::Impl(WorldConfig c) : cfg(std::move(c)) {
  n = cfg.size;
  if (n < 1) throw Error(ErrorCode::kInvalidArgument, "chorus sim: world size must be >= 1");
  if (!cfg.hostOf.empty() && cfg.hostOf.size() != static_cast<size_t>(n)) {
    throw Error(ErrorCode::kInvalidArgument, "chorus sim: hostOf needs one entry per rank");
  }
  if (!cfg.startDelay.empty() && cfg.startDelay.size() != static_cast<size_t>(n)) {
    throw Error(ErrorCode::kInvalidArgument, "chorus sim: startDelay needs one entry per rank");
  }
  dry = cfg.payload == Payload::kDry;
  const Network& net = cfg.network;
  shmAlphaPs = toPs(net.shmAlpha);
  netAlphaPs = toPs(net.netAlpha);
  overheadPs = toPs(net.overhead);
  shmBetaPs = net.shmBeta * 1e12;
  netBetaPs = net.netBeta * 1e12 * std::max(1.0, net.oversubscription);
  gammaPs = net.gamma * 1e12;
  copyPs = net.copy * 1e12;
  if (net.sharedCores < 0 || net.netCoreTime < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "chorus sim: sharedCores and netCoreTime must be >= 0");
  }
  if (net.sharedCores > 0 && net.netCoreTime > 0) {
    coreBetaPs = net.netCoreTime * 1e12;
    coreFree.assign(static_cast<size_t>(net.sharedCores), 0);
  }
  timed = shmAlphaPs || netAlphaPs || overheadPs || shmBetaPs > 0 || netBetaPs > 0 || gammaPs > 0 ||
          copyPs > 0 || coreBetaPs > 0 ||
          std::any_of(cfg.startDelay.begin(), cfg.startDelay.end(), [](double d) { return d > 0; });

  // Hosts: index them by first appearance, as topologyOf does.
  hostIds.resize(static_cast<size_t>(n));
  hostIndex.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const int h = cfg.hostOf.empty() ? 0 : cfg.hostOf[static_cast<size_t>(r)];
    hostIds[static_cast<size_t>(r)] = "host" + std::to_string(h);
  }
  topo = std::make_shared<const algo::Topology>(algo::topologyOf(hostIds));
  for (int r = 0; r < n; ++r)
    hostIndex[static_cast<size_t>(r)] = topo->hostOf[static_cast<size_t>(r)];
  layered = topo->layered();
  oneHost = topo->hostCount() == 1;
  egressFree.assign(static_cast<size_t>(topo->hostCount()), 0);
  ingressFree.assign(static_cast<size_t>(topo->hostCount()), 0);

  installFaultHandler();
  if (dry) {
    reduce::InternalKernels k;
    k.reduce = &simReduce;
    k.divide = &simDivide;
    k.copy = &simCopy;
    reduce::setInternalKernels(reduce::kSimBytes, k);
  }

  ranks.reset(new Rank[static_cast<size_t>(n)]);
  for (int r = 0; r < n; ++r) {
    Rank& k = ranks[static_cast<size_t>(r)];
    k.index = r;
    k.tx = std::make_unique<VirtualTransport>(this, &k);
    if (dry) k.scratch.reserveFrom(&reserveUntouchable);
    k.group.rank = r;
    k.group.size = n;
    k.group.tx = k.tx.get();
    k.group.scratch = &k.scratch;
    k.group.timeout = cfg.options.timeout;
    k.group.segmentBytes = cfg.options.segmentBytes;
    k.group.ringBidirectionalBytes = static_cast<size_t>(cfg.options.tuning.ringBidirectionalBytes);
    if (layered) {
      k.hier = algo::makeHierarchy(k.group, topo, cfg.options);
      if (dry) {
        k.hier->localScratch.reserveFrom(&reserveUntouchable);
        k.hier->crossScratch.reserveFrom(&reserveUntouchable);
      }
      k.group.hier = k.hier.get();
    }
  }
  const size_t stack = cfg.stackBytes ? cfg.stackBytes : kDefaultStackBytes;
  stacks = std::make_unique<StackPool>(n, stack, n <= kMaxGuardedRanks);
}

void VirtualWorld::Impl::completeAt(Request& r, Rank& owner, Time t) {
  const Time now = current ? current->clock : 0;
  if (t > now) {
    push(t, &r, owner.index);
    return;
  }
  r.state = Request::State::kDone;
  --owner.pending;
  if (&owner != current && (owner.blockedOn == &r || owner.blockedOn == &g_pollMarker)) {
    owner.blockedOn = nullptr;
    push(now, nullptr, owner.index);
  }
}

void VirtualWorld::Impl::match(Rank& receiver, Message* m, Request& recv, int src, Time at) {
  if (m->step != recv.step || m->bytes != recv.bytes ||
      (m->opBegun && receiver.opBegun && !m->op.sameCall(receiver.op))) {
    std::string why = "rank " + std::to_string(receiver.index) + " receives (step " +
                      std::to_string(recv.step) + ", " + std::to_string(recv.bytes) +
                      " bytes) from rank " + std::to_string(src) +
                      ", whose next message is (step " + std::to_string(m->step) + ", " +
                      std::to_string(m->bytes) + " bytes)";
    if (m->opBegun && receiver.opBegun && !m->op.sameCall(receiver.op)) {
      why += "; calls differ: " + receiver.op.describe() + " #" + std::to_string(receiver.op.seq) +
             " here, " + m->op.describe() + " #" + std::to_string(m->op.seq) + " there";
    }
    pool.put(m);
    throw Error(ErrorCode::kMismatch, why);
  }
  if (!dry && m->bytes > 0) std::memcpy(recv.data, m->data, m->bytes);
  recv.moved = m->bytes;
  if (m->send != nullptr) {
    m->send->moved = m->bytes;
    completeAt(*m->send, ranks[static_cast<size_t>(src)], std::max(at, m->arrival));
  }
  completeAt(recv, receiver, std::max(at, m->arrival));
  pool.put(m);
}

void VirtualWorld::Impl::postSend(Rank& k, Request& r, int peer, const void* data, size_t bytes,
                                  uint32_t step) {
  if (unwinding) return;
  checkPeer(k, peer, "send");
  if (overheadPs != 0) k.clock += overheadPs;
  syncTime(k);
  r.start(peer, step, data, bytes);
  ++k.pending;
  ++messages;

  Message* m = pool.get();
  m->data = static_cast<const uint8_t*>(data);
  m->bytes = bytes;
  m->step = step;
  m->op = k.op;
  m->opBegun = k.opBegun;
  const Time t = k.clock;
  Time leaves = t, arrives = t;
  if (timed) {
    const int hs = hostIndex[static_cast<size_t>(k.index)];
    const int hd = hostIndex[static_cast<size_t>(peer)];
    if (hs == hd) {
      const Time xfer = static_cast<Time>(static_cast<double>(bytes) * shmBetaPs);
      const Time start = std::max(t, k.shmFree);
      k.shmFree = start + xfer;
      leaves = start + xfer;
      arrives = start + shmAlphaPs + xfer;
    } else {
      const Time xfer = static_cast<Time>(static_cast<double>(bytes) * netBetaPs);
      Time& egress = egressFree[static_cast<size_t>(hs)];
      Time& ingress = ingressFree[static_cast<size_t>(hd)];
      const Time start = std::max(t, egress);
      egress = start + xfer;
      leaves = start + xfer;
      const Time in = std::max(start + netAlphaPs, ingress);
      ingress = in + xfer;
      arrives = in + xfer;
      if (!coreFree.empty() && bytes > 0) {
        // The stack's work takes the earliest free shared core; the wire cannot run ahead of it.
        Time& core = *std::min_element(coreFree.begin(), coreFree.end());
        const Time begin = std::max(start, core);
        core = begin + static_cast<Time>(static_cast<double>(bytes) * coreBetaPs);
        leaves = std::max(leaves, core);
        arrives = std::max(arrives, core + netAlphaPs);
      }
    }
  }
  m->arrival = arrives;
  if (dry) {
    m->send = nullptr;
    completeAt(r, k, leaves);  // eager: done once the bytes have left
  } else {
    m->send = &r;  // rendezvous: done when received (and not before the bytes arrived)
  }

  Channel* ch = k.sendPeer == peer ? k.sendChan : nullptr;
  if (ch == nullptr) {
    ch = &channel(k.index, peer);
    k.sendPeer = peer;
    k.sendChan = ch;
  }
  if (ch->recvHead != nullptr) {
    Request* recv = transport::popRequest(ch->recvHead, ch->recvTail);
    match(ranks[static_cast<size_t>(peer)], m, *recv, k.index, t);
  } else {
    if (ch->tail) {
      ch->tail->next = m;
    } else {
      ch->head = m;
    }
    ch->tail = m;
    ++queued;
  }
}

void VirtualWorld::Impl::postRecv(Rank& k, Request& r, int peer, void* data, size_t bytes,
                                  uint32_t step) {
  if (unwinding) return;
  checkPeer(k, peer, "receive");
  syncTime(k);
  r.start(peer, step, data, bytes);
  ++k.pending;
  Channel* ch = k.recvPeer == peer ? k.recvChan : nullptr;
  if (ch == nullptr) {
    ch = &channel(peer, k.index);
    k.recvPeer = peer;
    k.recvChan = ch;
  }
  if (ch->head != nullptr) {
    Message* m = ch->head;
    ch->head = m->next;
    if (ch->head == nullptr) ch->tail = nullptr;
    --queued;
    r.next = nullptr;
    match(k, m, r, peer, k.clock);
  } else {
    transport::pushRequest(ch->recvHead, ch->recvTail, &r);
  }
}

void VirtualWorld::Impl::wait(Rank& k, Request& r) {
  if (unwinding || r.state != Request::State::kPending) return;
  k.blockedOn = &r;
  suspend(k);
}

void VirtualWorld::Impl::poll(Rank& k) {
  if (unwinding) return;
  k.blockedOn = &g_pollMarker;
  suspend(k);
}

std::string VirtualWorld::Impl::describeWait(const Rank& k) {
  std::string s = "rank " + std::to_string(k.index);
  if (k.blockedOn == &g_pollMarker) {
    return s + " polls with " + std::to_string(k.pending) + " request(s) pending";
  }
  if (k.blockedOn == nullptr) return s + " is not blocked";
  const Request& r = *k.blockedOn;
  bool isRecv = false;
  Channel& in = channel(r.peer, k.index);
  for (Request* q = in.recvHead; q != nullptr; q = q->next) isRecv = isRecv || q == &r;
  const std::string what =
      "(step " + std::to_string(r.step) + ", " + std::to_string(r.bytes) + " bytes)";
  if (isRecv) return s + " waits for a message from rank " + std::to_string(r.peer) + " " + what;
  return s + " waits for rank " + std::to_string(r.peer) + " to receive its message " + what;
}

std::string VirtualWorld::Impl::unreceivedReport(size_t limit) {
  std::string s;
  size_t lines = 0, more = 0;
  for (Channel& c : channels.all()) {
    for (Message* m = c.head; m != nullptr; m = m->next) {
      if (lines < limit) {
        s += "\n  rank " + std::to_string(c.src) + " sent rank " + std::to_string(c.dst) +
             " a message (step " + std::to_string(m->step) + ", " + std::to_string(m->bytes) +
             " bytes) that it never received";
        ++lines;
      } else {
        ++more;
      }
    }
  }
  if (more) s += "\n  ... and " + std::to_string(more) + " more unreceived message(s)";
  return s;
}

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
      if (k.blockedOn != e.req && k.blockedOn != &g_pollMarker) continue;
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
