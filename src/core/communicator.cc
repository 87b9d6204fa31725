#include "core/communicator_impl.h"

#include "algo/hierarchy.h"
#include "algo/select.h"
#include "algo/topology.h"

#include "core/launch_env.h"
#include "core/validate.h"
#include "transport/connect.h"

#include <chorus/error.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>
#include <vector>

namespace chorus {

Communicator::Impl::Impl(Options opts, int r, int n, std::unique_ptr<transport::Transport> tx,
                         std::shared_ptr<Store> scopedStore, std::string route)
    : options(std::move(opts)),
      rank(r),
      size(n),
      store(std::move(scopedStore)),
      routeHost(std::move(route)),
      tx_(std::move(tx)) {
  group_.rank = rank;
  group_.size = size;
  group_.tx = tx_.get();
  group_.scratch = &scratch_;
  group_.timeout = options.timeout;
  group_.segmentBytes = options.segmentBytes;
  group_.ringBidirectionalBytes = static_cast<size_t>(options.tuning.ringBidirectionalBytes);
  if (tx_) {
    hier_ = algo::makeHierarchy(group_, tx_->hosts(), options);
    group_.hier = hier_.get();
    const algo::Topology topo = algo::topologyOf(tx_->hosts());
    placement_.hosts = topo.hostCount();
    placement_.perHost = topo.maxLocal();
    placement_.even = topo.even;
    placement_.sharedLocal = options.transport != "tcp";
  }
  worker_ = std::thread([this] { workerLoop(); });
}

Communicator::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    // Work still queued at destruction cannot finish: abort it rather than wait for peers.
    if (!queue_.empty()) abortRequested_ = true;
  }
  if (abortRequested_ && tx_) tx_->interrupt();
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  if (tx_) tx_->close();
}

void Communicator::Impl::prepare(OpDesc& desc, const void* in, const void* out) {
  validateCall(desc, in, out, rank, size);
  algo::Choice choice = algo::chooseAlgorithm(desc.kind, desc.count * sizeOf(desc.dtype),
                                              desc.dtype, size, placement_, options);
  desc.algo = choice.algo;
  if (!options.debug.empty() && (rank == 0 || options.debug == "all")) {
    OpDesc shown = desc;
    {
      std::lock_guard<std::mutex> lock(mu_);
      shown.seq = nextSeq_;  // the number issue() is about to give it
    }
    std::fprintf(stderr, "chorus[%d]: %s\n", rank,
                 algo::explain(shown, size, placement_, choice).c_str());
  }
  lastAlgo.store(static_cast<int>(desc.algo), std::memory_order_relaxed);
}

Work Communicator::Impl::issue(OpDesc desc, const void* in, void* out) {
  prepare(desc, in, out);
  auto state = std::make_shared<detail::WorkState>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    desc.seq = nextSeq_++;
    if (abortCause_ || abortRequested_) {
      state->done = true;
      state->error = abortedError(desc);
      return Work(state);
    }
    queue_.push_back(Task{algo::Args{desc, in, out}, state});
  }
  cv_.notify_one();
  return Work(state);
}

void Communicator::Impl::runBlocking(OpDesc desc, const void* in, void* out) {
  prepare(desc, in, out);
  Task task{algo::Args{desc, in, out}, std::make_shared<detail::WorkState>()};
  {
    std::unique_lock<std::mutex> lock(mu_);
    task.args.desc.seq = nextSeq_++;
    if (abortCause_ || abortRequested_) std::rethrow_exception(abortedError(task.args.desc));
    if (!queue_.empty() || busy_) {
      queue_.push_back(task);
      lock.unlock();
      cv_.notify_one();
      Work(task.state).wait();
      return;
    }
    busy_ = true;
  }
  // The caller waits for this call anyway: polling before sleeping costs it nothing.
  if (tx_) tx_->allowSpinning(true);
  execute(task);
  bool wakeWorker;
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
    // Only work queued meanwhile needs the worker; waking it for nothing costs two context
    // switches per call, more than a small all-reduce itself.
    wakeWorker = !queue_.empty() || stop_ || abortRequested_;
  }
  if (wakeWorker) cv_.notify_one();
  if (task.state->error) std::rethrow_exception(task.state->error);
}

std::exception_ptr Communicator::Impl::abortedError(const OpDesc& d) const {
  std::string why = "aborted by the application";
  if (abortCause_) {
    try {
      std::rethrow_exception(abortCause_);
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  return std::make_exception_ptr(Error(
      ErrorCode::kAborted,
      d.name() + " (rank " + std::to_string(rank) + "): communicator was aborted earlier: " + why));
}

void Communicator::Impl::requestAbort() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    abortRequested_ = true;
  }
  if (tx_) tx_->interrupt();
  cv_.notify_all();
}

void Communicator::Impl::failWith(const Error& cause) {
  bool driving;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (abortCause_) return;
    driving = busy_ || !queue_.empty();
    if (!driving) busy_ = true;  // keeps the worker off the transport while abortWith runs
  }
  if (driving) {
    requestAbort();
    return;
  }
  abortWith(cause);
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
  }
  cv_.notify_all();
}

std::exception_ptr Communicator::Impl::cause() const {
  std::lock_guard<std::mutex> lock(mu_);
  return abortCause_;
}

void Communicator::Impl::workerLoop() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return !busy_ && (stop_ || !queue_.empty() || (abortRequested_ && !abortCause_));
      });
      if (abortRequested_ && !abortCause_ && queue_.empty()) {
        busy_ = true;
        lock.unlock();
        abortWith(Error(ErrorCode::kAborted, "aborted by the application"));
        lock.lock();
        busy_ = false;
        continue;
      }
      if (queue_.empty()) return;  // stop_ and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
      if (abortCause_) {
        task.state->finish(abortedError(task.args.desc));
        continue;
      }
      busy_ = true;
    }
    // Work issued without waiting overlaps the application's computation: the worker sleeps
    // while it waits instead of polling on a core the application needs.
    if (tx_) tx_->allowSpinning(false);
    execute(task);
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
  }
}

void Communicator::Impl::execute(Task& task) {
  const OpDesc& d = task.args.desc;
  try {
    if (tx_) tx_->beginOp(d);
    algo::run(group_, task.args);
    task.state->finish(nullptr);
    return;
  } catch (const Error& e) {
    Error err(e.code(), d.name() + " (rank " + std::to_string(rank) + "): " + e.what());
    abortWith(err);
    task.state->finish(std::make_exception_ptr(err));
  } catch (const std::exception& e) {
    Error err(ErrorCode::kInternal, d.name() + " (rank " + std::to_string(rank) + "): " + e.what());
    abortWith(err);
    task.state->finish(std::make_exception_ptr(err));
  }
}

void Communicator::Impl::abortWith(const Error& cause) {
  if (tx_) tx_->abort(cause);
  std::deque<Task> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!abortCause_) abortCause_ = std::make_exception_ptr(cause);
    failed.swap(queue_);
    for (auto& t : failed) t.state->finish(abortedError(t.args.desc));
  }
}

// ---- Communicator ----

namespace {

struct StoreTarget {
  std::shared_ptr<Store> store;
  std::string routeHost;
};

// Rank 0 hosts the TCP store itself when nothing listens at the URL's address yet (runs under
// mpirun or srun need no separate server). Servers live as long as the process.
void maybeHostStore(const std::string& host, int port) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<TcpStoreServer>> servers;
  std::lock_guard<std::mutex> lock(mu);
  std::string key = host + ":" + std::to_string(port);
  if (servers.count(key)) return;
  try {
    servers[key] = std::make_unique<TcpStoreServer>(host, port);
  } catch (const Error&) {
    // Already served (by chorus-run, chorus-store or another communicator), or not our address.
  }
}

// Connects the ranks of one communicator through a store already scoped to it (every key this
// communicator's rendezvous uses is its own). route: see connectMesh.
std::unique_ptr<Communicator::Impl> connectScoped(std::shared_ptr<Store> scoped,
                                                  const std::string& route, int rank, int size,
                                                  Options options) {
  std::unique_ptr<transport::Transport> tx;
  if (size > 1) tx = transport::connect(*scoped, rank, size, options, route);
  return std::make_unique<Communicator::Impl>(std::move(options), rank, size, std::move(tx),
                                              std::move(scoped), route);
}

std::unique_ptr<Communicator::Impl> connect(std::shared_ptr<Store> store, const std::string& route,
                                            int rank, int size, Options options) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw Error(
        ErrorCode::kInvalidArgument,
        "rank " + std::to_string(rank) + " is not in [0, world size " + std::to_string(size) + ")");
  }
  if (!store) throw Error(ErrorCode::kInvalidArgument, "store is null");
  algo::validateAlgorithmSetting(options.algorithm);  // before any rank waits on this one
  // Each communicator created on the same store gets fresh keys: the n-th creation by a rank
  // pairs with the n-th creation by every other rank.
  int64_t generation = store->add("chorus/created/" + std::to_string(rank), 1);
  return connectScoped(makePrefixStore("chorus/" + std::to_string(generation), store), route, rank,
                       size, std::move(options));
}

}  // namespace

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::Impl& implOf(Communicator& c) { return *c.impl_; }
Communicator::~Communicator() = default;

std::unique_ptr<Communicator> Communicator::create(std::shared_ptr<Store> store, int rank, int size,
                                                   Options options) {
  return std::unique_ptr<Communicator>(
      new Communicator(connect(std::move(store), "", rank, size, std::move(options))));
}

std::unique_ptr<Communicator> Communicator::create(const std::string& storeUrl, int rank, int size,
                                                   Options options) {
  std::string route;
  if (storeUrl.rfind("tcp://", 0) == 0) {
    std::string hostPort = storeUrl.substr(6);
    auto colon = hostPort.rfind(':');
    if (colon != std::string::npos) {
      route = hostPort.substr(0, colon);
      int port = 0;
      try {
        port = std::stoi(hostPort.substr(colon + 1));
      } catch (...) {
      }
      if (rank == 0 && port > 0) maybeHostStore(route, port);
    }
  }
  auto store = openStore(storeUrl, options.timeout);
  return std::unique_ptr<Communicator>(
      new Communicator(connect(std::move(store), route, rank, size, std::move(options))));
}

std::unique_ptr<Communicator> Communicator::fromEnv() {
  if (launchedAlone()) return create(makeHashStore(), 0, 1, Options::fromEnv());
  LaunchEnv env = readLaunchEnv();
  return create(env.store, env.rank, env.size, Options::fromEnv());
}

int Communicator::rank() const { return impl_->rank; }
int Communicator::size() const { return impl_->size; }
const Options& Communicator::options() const { return impl_->options; }

std::string Communicator::lastAlgorithm() const {
  int a = impl_->lastAlgo.load(std::memory_order_relaxed);
  return a < 0 ? std::string() : toString(static_cast<AlgorithmId>(a));
}

std::string Communicator::transportTo(int peer) const {
  if (peer < 0 || peer >= impl_->size) {
    throw Error(ErrorCode::kInvalidArgument, "transportTo: rank " + std::to_string(peer) +
                                                 " is not in [0, " + std::to_string(impl_->size) +
                                                 ")");
  }
  if (peer == impl_->rank) return "self";
  return impl_->transport()->pathTo(peer);
}

std::string Communicator::hostOf(int peer) const {
  if (peer < 0 || peer >= impl_->size) {
    throw Error(ErrorCode::kInvalidArgument, "hostOf: rank " + std::to_string(peer) +
                                                 " is not in [0, " + std::to_string(impl_->size) +
                                                 ")");
  }
  if (!impl_->transport()) return impl_->options.hostId;
  return impl_->transport()->hosts().at(static_cast<size_t>(peer));
}

void Communicator::checkSizes(const char* op, size_t expected, size_t got) {
  if (expected != got) {
    throw Error(ErrorCode::kInvalidArgument, std::string(op) + ": output holds " +
                                                 std::to_string(got) + " elements, expected " +
                                                 std::to_string(expected));
  }
}

Work Communicator::allReduce(const void* in, void* out, size_t count, DataType t, ReduceOp op) {
  return impl_->issue(OpDesc::of(CollectiveKind::kAllReduce, count, t, op, 0), in, out);
}
Work Communicator::reduceScatter(const void* in, void* out, size_t n, DataType t, ReduceOp op) {
  return impl_->issue(OpDesc::of(CollectiveKind::kReduceScatter, n, t, op, 0), in, out);
}
Work Communicator::allGather(const void* in, void* out, size_t n, DataType t) {
  return impl_->issue(OpDesc::of(CollectiveKind::kAllGather, n, t, ReduceOp::kSum, 0), in, out);
}
Work Communicator::broadcast(void* buf, size_t count, DataType t, int root) {
  return impl_->issue(OpDesc::of(CollectiveKind::kBroadcast, count, t, ReduceOp::kSum, root), buf,
                      buf);
}
Work Communicator::barrier() {
  return impl_->issue(OpDesc::of(CollectiveKind::kBarrier, 0, DataType::kU8, ReduceOp::kSum, 0),
                      nullptr, nullptr);
}

namespace {
// First word of every rank's split record: a rank that runs another all-gather of the same shape
// at this point is reported as a mismatch instead of being read as a split request.
constexpr int64_t kSplitMagic = 0x63686f7275737370;  // "chorussp"
}  // namespace

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  return split(color, key, impl_->options);
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, const Options& options) {
  Impl& im = *impl_;
  const int64_t index = static_cast<int64_t>(im.splits.fetch_add(1));
  const std::string where = "split #" + std::to_string(index) + " (rank " +
                            std::to_string(im.rank) + ", color " + std::to_string(color) + ")";
  if (color < 0) color = kNoColor;

  // Everyone learns everyone's (color, key) through an ordinary collective on this communicator:
  // it is numbered, ordered and failure-checked like any other.
  constexpr size_t kWords = 4;  // magic, index, color, key
  const int64_t mine[kWords] = {kSplitMagic, index, color, key};
  std::vector<int64_t> all(kWords * static_cast<size_t>(im.size));
  try {
    im.runBlocking(
        OpDesc::of(CollectiveKind::kAllGather, kWords, DataType::kI64, ReduceOp::kSum, 0), mine,
        all.data());
  } catch (const Error& e) {
    throw Error(e.code(), where + ": " + e.what());
  }
  std::vector<std::pair<int64_t, int>> members;  // (key, rank here) of this color
  for (int q = 0; q < im.size; ++q) {
    const int64_t* rec = all.data() + kWords * static_cast<size_t>(q);
    if (rec[0] != kSplitMagic || rec[1] != index) {
      Error err(ErrorCode::kMismatch, where + ": rank " + std::to_string(q) +
                                          " ran a different all_gather instead of split #" +
                                          std::to_string(index));
      im.failWith(err);
      throw err;
    }
    if (color >= 0 && rec[2] == color) members.emplace_back(rec[3], q);
  }
  if (color < 0) return nullptr;
  std::sort(members.begin(), members.end());
  const int childSize = static_cast<int>(members.size());
  const int childRank = static_cast<int>(
      std::find(members.begin(), members.end(), std::make_pair(int64_t{key}, im.rank)) -
      members.begin());
  if (!im.store) throw Error(ErrorCode::kInternal, where + ": communicator has no store");
  // Keys unique to (this communicator, the n-th split, color): this communicator's store is
  // already scoped to it, and a child's store to the child, so nested splits never meet.
  auto scoped =
      makePrefixStore("split/" + std::to_string(index) + "/" + std::to_string(color), im.store);
  try {
    return std::unique_ptr<Communicator>(new Communicator(
        connectScoped(std::move(scoped), im.routeHost, childRank, childSize, options)));
  } catch (const Error& e) {
    throw Error(e.code(), where + ": connecting new rank " + std::to_string(childRank) + " of " +
                              std::to_string(childSize) + ": " + e.what());
  }
}

void Communicator::abort() { impl_->requestAbort(); }
std::exception_ptr Communicator::abortCause() const { return impl_->cause(); }

}  // namespace chorus
