// The worker thread and its queue: collectives run in issue order, on the worker or (blocking
// calls on an idle communicator) on the caller's thread; a failure aborts the communicator.
#include "core/communicator_impl.h"
#include "core/trace_calls.h"

#include "algo/hierarchy.h"
#include "algo/select.h"
#include "algo/topology.h"

#include "core/registered_memory.h"
#include "core/validate.h"
#include "trace/service.h"

#include <chorus/error.hpp>

#include <cstdio>
#include <optional>
#include <utility>

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
  // Links leave the machine where the ranks span hosts: known alike on every rank, so every rank
  // cuts a ring's blocks alike. TCP within one host (loopback) keeps the set segment: there the
  // larger segments measured 10% less busbw and 10-15% more CPU per byte at 64 MiB.
  if (tx_ && algo::topologyOf(tx_->hosts()).hostCount() > 1) {
    group_.tcpSegmentBytes = options.tcpSegmentBytes;
  }
  group_.ringBidirectionalBytes = static_cast<size_t>(options.tuning.ringBidirectionalBytes);
  if (tx_) {
    hier_ = algo::makeHierarchy(group_, tx_->hosts(), options);
    group_.hier = hier_.get();
    // In place needs shared memory between the ranks: not where the application asked for TCP.
    if (options.transport != TransportKind::kTcp) {
      shared_ = registered::makeAccess();
      group_.shared = shared_.get();
    }
    const algo::Topology topo = algo::topologyOf(tx_->hosts());
    placement_.hosts = topo.hostCount();
    placement_.perHost = topo.maxLocal();
    placement_.even = topo.even;
    placement_.sharedLocal = options.transport != TransportKind::kTcp;
  }
  initTrace();
  worker_ = std::thread([this] { workerLoop(); });
}

Communicator::Impl::~Impl() {
  unwatchHeartbeat();  // the trace service may still report a silent peer until this returns
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
  if (watched_) trace::unwatch(trace_.get());
  if (trace_->settings.report && rank == 0) printStragglerReport();
  size_t unfreedBytes = 0;
  if (size_t n = registered::disown(this, unfreedBytes)) {
    std::fprintf(stderr,
                 "chorus[%d]: %zu registered buffer(s) (%zu bytes) allocated through this "
                 "communicator were not freed before its destruction; they stay mapped until the "
                 "process exits\n",
                 rank, n, unfreedBytes);
  }
}

void Communicator::Impl::prepare(algo::Args& args) {
  OpDesc& desc = args.desc;
  validateArgs(args, rank, size);
  const uint64_t bytes = desc.count * sizeOf(desc.dtype);
  const bool explains =
      options.debug == DebugLevel::kAll || (options.debug == DebugLevel::kRank0 && rank == 0);
  // A shape seen before takes its remembered choice; CHORUS_DEBUG shows the model's figures, so
  // it always asks the model.
  std::optional<AlgorithmId> known;
  if (!explains) known = choices_.find(desc.kind, bytes, desc.dtype, desc.wire);
  if (known) {
    desc.algo = *known;
  } else {
    algo::Choice choice =
        algo::chooseAlgorithm(desc.kind, bytes, desc.dtype, size, placement_, options, desc.wire);
    desc.algo = choice.algo;
    choices_.remember(desc.kind, bytes, desc.dtype, desc.wire, desc.algo);
    if (explains) {
      OpDesc shown = desc;
      {
        std::lock_guard<std::mutex> lock(mu_);
        shown.seq = OpDesc::collectiveSeq(collectives_);  // what issue() is about to give it
      }
      std::fprintf(stderr, "chorus[%d]: %s\n", rank,
                   algo::explain(shown, size, placement_, choice).c_str());
    }
  }
  lastAlgo.store(static_cast<int>(desc.algo), std::memory_order_relaxed);
  if (desc.kind == CollectiveKind::kSendRecv) {
    // Every message between two collectives travels under one description, so that one that
    // arrives while the receiver still waits for an earlier one is not taken for another call;
    // the transport checks each message's size instead.
    args.bytes = bytes;
    desc.count = 0;
    desc.dtype = DataType::kU8;
  }
}

uint64_t Communicator::Impl::takeSeq(CollectiveKind kind) {
  if (kind == CollectiveKind::kSendRecv) return OpDesc::pointToPointSeq(collectives_);
  return OpDesc::collectiveSeq(collectives_++);
}

Work Communicator::Impl::issue(OpDesc desc, const void* in, void* out, Run run) {
  return issue(algo::Args{desc, in, out}, run);
}

Work Communicator::Impl::issue(algo::Args args, Run run) {
  if (run == Run::kBlocking) return Work(runBlocking(std::move(args)));
  prepare(args);
  auto state = std::make_shared<detail::WorkState>();
  state->pin = registered::pin(args.in, args.out);
  {
    std::lock_guard<std::mutex> lock(mu_);
    args.desc.seq = takeSeq(args.desc.kind);
    Task task{std::move(args), state};
    traceIssue(task);
    if (abortCause_ || abortRequested_) {
      if (recorder_) recorder_->dropQueued(task.traceId, trace::ticks());
      state->finishedEarly(abortedError(task.args.desc));
      return Work(state);
    }
    state->owner = weak_from_this();
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return Work(state);
}

namespace {

// What a blocking call that ran at once returns: a finished, successful work (one per thread, so
// that the calls of different threads share no reference count).
const std::shared_ptr<detail::WorkState>& finishedWork() {
  thread_local const std::shared_ptr<detail::WorkState> done = [] {
    auto s = std::make_shared<detail::WorkState>();
    s->finishedEarly(nullptr);
    return s;
  }();
  return done;
}

}  // namespace

std::shared_ptr<detail::WorkState> Communicator::Impl::runBlocking(algo::Args args) {
  prepare(args);
  // A call that runs at once on this thread needs no shared state: nobody else waits for it.
  Task task{std::move(args)};
  std::shared_ptr<void> pin = registered::pin(task.args.in, task.args.out);
  {
    std::unique_lock<std::mutex> lock(mu_);
    task.args.desc.seq = takeSeq(task.args.desc.kind);
    traceIssue(task, /*blocking=*/true);
    if (abortCause_ || abortRequested_) {
      if (recorder_) recorder_->dropQueued(task.traceId, trace::ticks());
      std::rethrow_exception(abortedError(task.args.desc));
    }
    if (!queue_.empty() || busy_) {
      task.state = std::make_shared<detail::WorkState>();
      task.state->pin = std::move(pin);
      task.state->owner = weak_from_this();
      queue_.push_back(task);
      lock.unlock();
      cv_.notify_one();
      Work(task.state).wait();
      return task.state;
    }
    busy_ = true;
    task.startsAtIssue = true;
  }
  runTask(task);
  pin.reset();  // the call is done with its buffers
  if (task.error) std::rethrow_exception(task.error);
  return finishedWork();
}

void Communicator::Impl::runIfNext(detail::WorkState& state) {
  Task task;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Anything else (the worker or another waiter on the transport, earlier work queued, an abort
    // to carry out) is the worker's job; the caller then just waits.
    if (busy_ || stop_ || abortRequested_ || abortCause_ || queue_.empty() ||
        queue_.front().state.get() != &state) {
      return;
    }
    task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
  }
  runTask(task);
}

void Communicator::Impl::runTask(Task& task) {
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
  // An abort the worker has not carried out yet already counts.
  if (!abortCause_ && abortRequested_) {
    return std::make_exception_ptr(Error(
        ErrorCode::kAborted, "rank " + std::to_string(rank) + ": aborted by the application"));
  }
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
        lock.unlock();  // completion callbacks may issue new work
        if (recorder_) recorder_->dropQueued(task.traceId, trace::ticks());
        finish(task, abortedError(task.args.desc));
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
  if (d.kind == CollectiveKind::kSendRecv) return executePointToPoint(task);
  traceStart(task);
  try {
    if (tx_) tx_->beginOp(d);
    algo::run(group_, task.args);
    traceEnd(task, true);
    finish(task, nullptr);
    return;
  } catch (const Error& e) {
    Error err(e.code(), d.name() + " (rank " + std::to_string(rank) + "): " + e.what());
    if (e.code() == ErrorCode::kAborted) {
      // Interrupted by the heartbeat: say which peer went silent, not "aborted".
      if (const std::string why = silentReason(); !why.empty()) {
        err = Error(ErrorCode::kPeerFailure,
                    d.name() + " (rank " + std::to_string(rank) + "): " + why);
      }
    }
    // The dump first: it shows the call as it was when it failed (waiting on whom).
    traceFailure(err);
    traceEnd(task, false);
    const std::exception_ptr stored = abortWith(err);  // the peers learn of it at once
    // Then this rank's own account names first the rank(s) that never entered the call, which
    // the peer it waited for may not be (in a ring that peer waits itself).
    std::string culprit;
    if (e.code() == ErrorCode::kTimeout || e.code() == ErrorCode::kPeerFailure) {
      culprit = stallDiagnosis(task);
    }
    if (culprit.empty()) return finish(task, stored ? stored : std::make_exception_ptr(err));
    const std::exception_ptr full = std::make_exception_ptr(Error(
        e.code(), d.name() + " (rank " + std::to_string(rank) + "): " + culprit + "; " + e.what()));
    {
      // Later calls say that the communicator was aborted by this failure: in the same words.
      std::lock_guard<std::mutex> lock(mu_);
      if (stored && abortCause_ == stored) abortCause_ = full;
    }
    finish(task, full);
  } catch (const std::exception& e) {
    Error err(ErrorCode::kInternal, d.name() + " (rank " + std::to_string(rank) + "): " + e.what());
    traceFailure(err);
    traceEnd(task, false);
    abortWith(err);
    finish(task, std::make_exception_ptr(err));
  }
}

std::exception_ptr Communicator::Impl::abortWith(const Error& cause) {
  if (tx_) tx_->abort(cause);
  std::deque<Task> failed;
  std::exception_ptr stored;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!abortCause_) stored = abortCause_ = std::make_exception_ptr(cause);
    failed.swap(queue_);
  }
  // Outside the lock: completion callbacks may issue new work (which then fails at once).
  for (auto& t : failed) {
    if (recorder_) recorder_->dropQueued(t.traceId, trace::ticks());
    t.state->finish(abortedError(t.args.desc));
  }
  return stored;
}

}  // namespace chorus
