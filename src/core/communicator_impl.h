// The communicator's state and its worker thread, which runs collectives in issue order.
#pragma once

#include <chorus/communicator.hpp>

#include "algo/collectives.h"
#include "algo/group.h"
#include "algo/hierarchy.h"
#include "algo/in_place.h"
#include "algo/select.h"
#include "common/deadline.h"
#include "core/choice_memo.h"
#include "core/work_state.h"
#include "trace/subject.h"
#include "transport/transport.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace chorus {

struct Communicator::Impl : std::enable_shared_from_this<Communicator::Impl> {
  // store: the store scoped to this communicator (keys of its rendezvous), kept for split();
  // routeHost: the store's host, which chooses the listening address (see transport::connect).
  Impl(Options options, int rank, int size, std::unique_ptr<transport::Transport> tx,
       std::shared_ptr<Store> store, std::string routeHost);
  ~Impl();

  // Validates, numbers and queues one collective (run == kInBackground), or runs it to the end
  // (kBlocking, see runBlocking) and returns a completed Work.
  Work issue(OpDesc desc, const void* in, void* out, Run run = Run::kInBackground);
  Work issue(algo::Args args, Run run = Run::kInBackground);  // calls with per-rank counts too
  // Blocking form: runs on the calling thread when nothing else is queued or running, without
  // waking the worker (a handoff and a wake-up cost more than a small collective); else queues
  // and waits. Throws on failure; returns the completed state.
  std::shared_ptr<detail::WorkState> runBlocking(algo::Args args);
  void runBlocking(OpDesc desc, const void* in, void* out) {
    runBlocking(algo::Args{desc, in, out});
  }
  // Runs the task of `state` on the calling thread if it is the next one due and no thread is
  // driving the transport (else does nothing: the worker runs it). Keeps issue order.
  void runIfNext(detail::WorkState& state);
  void requestAbort();
  // Aborts with `cause` (which is sent to the peers) from a caller's thread, between calls;
  // requestAbort() when another thread is driving the transport.
  void failWith(const Error& cause);
  std::exception_ptr cause() const;
  const transport::Transport* transport() const { return tx_.get(); }
  // Starts the progress records (to `root`, the store the ranks met at, unless
  // options.progressStore names another) and the signal dumps;
  // rank 0 registers the communicator under chorus/progress/. Called once, after creation.
  void startTracing(std::shared_ptr<Store> root);
  // Writes this rank's dump to dir (empty: CHORUS_TRACE_DIR); returns its path.
  std::string dumpTrace(const std::string& dir, const char* reason = "request");
  const trace::Subject& trace() const { return *trace_; }
  std::shared_ptr<trace::Subject> traceSubject() const { return trace_; }

  Options options;
  std::atomic<int> lastAlgo{-1};  // AlgorithmId of the last prepared call, for lastAlgorithm()
  int rank;
  int size;
  const std::shared_ptr<Store> store;
  const std::string routeHost;
  std::shared_ptr<Store> rootStore;  // the store the ranks met at (progress records)
  std::atomic<uint64_t> splits{
      0};  // split() calls so far: the n-th split's keys are "split/<n>/.."

  // Membership (shrink.cc, docs/fault-tolerance.md). Set once, before the communicator is
  // handed out: elastic: made by create(), join() or shrink() (shrink() is allowed on it);
  // generation: shrinks and joins since create(); formerRanks: see Communicator::formerRanks
  // (empty: 0..size-1).
  bool elastic = false;
  uint64_t generation = 0;
  std::vector<int> formerRanks;
  // Ranks that an agreement left out (shrink() on this communicator). Failures the transport
  // saw are added by failedRanks().
  std::vector<int> declaredFailed() const;
  void declareFailed(std::vector<int> ranks);
  // Heartbeat (trace/heartbeat.h, heartbeat_failure.cc): `peer` published no progress record
  // for `silentSeconds`, past options.trace.heartbeatSeconds, while this rank waited in a call.
  // It counts as failed from now on (failedRanks(), so shrink() does not wait for it) and the
  // call in progress fails with kPeerFailure naming it (its peers learn why). Never blocks long.
  void declareSilent(int peer, double silentSeconds);
  // The stall check (trace/heartbeat.h): `peer` is alive but was in no call for `idleSeconds`,
  // past the stall timeout (Communicator::setStallTimeout), while this rank waited in one. Dealt
  // with as declareSilent.
  void declareStalled(int peer, double idleSeconds);
  // Ends this communicator's use before a shrink: waits (until `deadline`) for the calls in
  // flight, then closes its connections cleanly (peers finishing a call still get what this
  // rank owes them); later calls fail with kAborted naming `why`. A communicator already
  // aborted stays as it is.
  void retire(const std::string& why, const Deadline& deadline);

 private:
  struct Task {
    algo::Args args;
    // Null for a blocking call that runs at once on its caller's thread (runBlocking): its
    // outcome goes to `error`, and nobody else can wait for it.
    std::shared_ptr<detail::WorkState> state{};
    std::exception_ptr error{};
    uint64_t traceId = 0;    // the call's entry in the flight recorder (0: none)
    uint64_t issuedAt = 0;   // trace::ticks() at issue
    uint64_t startedAt = 0;  // trace::ticks() at start
    // Runs at once on the issuing thread: its start is its issue (one clock read less).
    bool startsAtIssue = false;
  };
  void workerLoop();
  void execute(Task& task);
  // The task's outcome, to its waiters (or its caller, for a task without a state).
  static void finish(Task& task, std::exception_ptr error) {
    if (task.state) return task.state->finish(std::move(error));
    task.error = std::move(error);
  }
  // Sends and receives between the same two collectives, run together (point_to_point.cc).
  void executePointToPoint(Task& first);
  // Runs a task on the calling thread, which has set busy_ (runBlocking, runIfNext).
  void runTask(Task& task);
  void prepare(algo::Args& args);
  // Returns the cause as stored, or null when an earlier cause was kept.
  std::exception_ptr abortWith(const Error& cause);
  // Flight recorder: a call issued (needs mu_ held), started, ended; a failure's dump.
  // blocking: runBlocking's call, which runs at once when nothing is queued or running.
  // Inline, in core/trace_calls.h (include it where they are used).
  inline void traceIssue(Task& task, bool blocking = false);
  inline void traceStart(Task& task);
  inline void traceEnd(const Task& task, bool ok);
  void traceFailure(const Error& e);
  // "rank 2 never entered allreduce #5 (...)" from the ranks' progress records, or "".
  std::string stallDiagnosis(const Task& task) const;
  void printStragglerReport() const;
  void initTrace();
  uint64_t takeSeq(CollectiveKind kind);                   // needs mu_ held
  std::exception_ptr abortedError(const OpDesc& d) const;  // needs mu_ held

  std::unique_ptr<transport::Transport> tx_;
  std::shared_ptr<trace::Subject> trace_;  // shared with the trace service (trace/service.h)
  trace::Recorder* recorder_ = nullptr;    // trace_'s, or null when the recorder is off
  bool watched_ = false;
  algo::Scratch scratch_;
  algo::Group group_;
  // Registered memory and the peers' mapped buffers (algo/in_place.h); null with TCP only.
  std::unique_ptr<algo::SharedMemoryAccess> shared_;
  std::unique_ptr<algo::Hierarchy> hier_;  // subgroups by host; null for a flat layout
  algo::Placement placement_;              // hosts and ranks per host, for the algorithm choice
  ChoiceMemo choices_;                     // the choice for recent call shapes

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  uint64_t collectives_ = 0;  // issued so far: the next one is collective number collectives_
  bool stop_ = false;
  bool busy_ = false;  // a thread (worker or blocking caller) is driving the transport
  bool abortRequested_ = false;
  std::exception_ptr abortCause_;
  std::thread worker_;
  mutable std::mutex membershipMu_;
  std::vector<int> declaredFailed_;
  // The heartbeat's way back from the trace service (cleared first at destruction), and why it
  // interrupted the call in progress (guarded by mu_; empty: it did not).
  struct SilentSink;
  std::shared_ptr<SilentSink> silentSink_;
  std::string silentReason_;
  void watchHeartbeat();
  void declareDead(int peer, const std::string& why);
  void unwatchHeartbeat();
  std::string silentReason() const;
};

}  // namespace chorus
