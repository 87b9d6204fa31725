// The communicator: a group of ranks and the collectives they run together.
#pragma once

#include <chorus/export.h>

#include <chorus/error.hpp>
#include <chorus/options.hpp>
#include <chorus/store.hpp>
#include <chorus/types.hpp>
#include <chorus/work.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace chorus {

// Color for Communicator::split (any negative value works): this rank joins no new communicator.
inline constexpr int kNoColor = -1;

// How an untyped call runs. kInBackground: it is queued for the communicator's worker and the
// call returns at once (wait() on an idle communicator still runs it on the waiting thread).
// kBlocking: it has finished when the call returns (a failure throws); on an idle communicator
// it runs on the caller's thread without waking the worker, the cheapest path for small
// messages (the C API's blocking calls use it).
enum class Run : uint8_t { kInBackground, kBlocking };

// Which ranks arrived last in this communicator's collectives, as this rank saw them
// (Communicator::stragglerReport; docs/trace-format.md, "Dump file"). A rank's arrival is its
// first message of the call (this rank's own: the moment it started the call); the last of them
// is counted against its rank, with its lag behind the second-to-last arrival. A call counts when
// this rank heard from at least one peer in it. A rank that finds every peer's message already
// waiting counts itself last, with no lag (by how much, only the others can tell).
struct CHORUS_API StragglerReport {
  struct Rank {
    int rank = 0;
    uint64_t last = 0;        // calls in which it arrived last
    double lastFraction = 0;  // last / collectives
    uint64_t lagSamples = 0;  // of those, the calls whose lag this rank measured
    double medianLagMs = 0;   // lag behind the second-to-last arrival (about 10% precision)
    double p99LagMs = 0;
  };
  int seenBy = 0;            // the rank whose view this is
  uint64_t collectives = 0;  // completed collectives that counted
  std::vector<Rank> ranks;   // ranks that arrived last at least once, by rank
  // The lines CHORUS_REPORT=1 prints at destruction: "chorus: straggler report (...): rank 3
  // arrived last in 94% of calls, 12 ms behind at the median (p99 30.1 ms)"; "" when empty.
  std::string summary() const;
};

// Every rank must issue the same collectives in the same order. Each call returns at once with a
// Work; the operation runs on the communicator's worker thread, or on the caller's own thread
// when it waits on the Work before the worker has started it (a blocking call on an idle
// communicator: `comm->allReduce(x).wait()` costs no thread handoff). A failure (lost peer,
// timeout, mismatched calls) aborts the communicator: the failing and every later operation throw.
class CHORUS_API Communicator {
 public:
  // Connects to every other rank through the store. Throws Error on failure or timeout.
  static std::unique_ptr<Communicator> create(std::shared_ptr<Store> store, int rank, int size,
                                              Options options = Options::fromEnv());
  static std::unique_ptr<Communicator> create(const std::string& storeUrl, int rank, int size,
                                              Options options = Options::fromEnv());
  // Rank, size and store from CHORUS_RANK/CHORUS_WORLD_SIZE/CHORUS_STORE or from the variables
  // set by mpirun (Open MPI, MPICH) and srun (Slurm). A program started on its own (none of
  // them set, no CHORUS_STORE) gets a world of one.
  static std::unique_ptr<Communicator> fromEnv();
  // The same with these options (instead of Options::fromEnv()). In a process an elastic
  // launcher started as a replacement for a lost rank (CHORUS_JOIN=1), both throw
  // Error(kInvalidArgument): such a process must join, as fromEnvOrJoin() does.
  static std::unique_ptr<Communicator> fromEnv(Options options);
  // For programs that survive a lost rank under an elastic launcher (chorus-run --elastic,
  // docs/elastic-launch.md): fromEnv(), except in a replacement (CHORUS_JOIN=1), which calls
  // join() on the launch store instead (CHORUS_RANK is then only a hint for logs).
  static std::unique_ptr<Communicator> fromEnvOrJoin();
  static std::unique_ptr<Communicator> fromEnvOrJoin(Options options);

  // ---- Membership (docs/fault-tolerance.md) ----

  // A new process (e.g. a replacement for a lost rank) joins a running job: waits (up to
  // options.timeout) for the next membership change (shrink()) of the job's communicator on
  // `store` (the one create() made on that same store, not a split), then returns its place in
  // the new communicator, after the survivors. Throws Error(kTimeout) when no change comes.
  static std::unique_ptr<Communicator> join(std::shared_ptr<Store> store,
                                            Options options = Options::fromEnv());
  static std::unique_ptr<Communicator> join(const std::string& storeUrl,
                                            Options options = Options::fromEnv());

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  const Options& options() const;
  // Algorithm chosen for the most recently issued collective ("ring", "rd", "rhd", "chain",
  // "dissemination", "binomial", "ring_gather", "direct", "pairwise", ..., or "none" for a group
  // of one); "" before the first.
  std::string lastAlgorithm() const;
  // How data to `peer` travels: "shm" (shared memory, same host), "tcp", or "self".
  std::string transportTo(int peer) const;
  // Host id of `peer` (Options::hostId, or the one detected).
  std::string hostOf(int peer) const;

  template <class T>
  Work allReduce(std::span<T> inout, ReduceOp op = ReduceOp::kSum) {
    return allReduce(inout.data(), inout.data(), inout.size(), dataTypeOf<T>, op);
  }
  template <class T>
  Work allReduce(std::span<const T> in, std::span<T> out, ReduceOp op = ReduceOp::kSum) {
    checkSizes("allreduce", in.size(), out.size());
    return allReduce(in.data(), out.data(), in.size(), dataTypeOf<T>, op);
  }
  // in holds size() * out.size() elements; this rank receives block rank() of the reduction.
  template <class T>
  Work reduceScatter(std::span<const T> in, std::span<T> out, ReduceOp op = ReduceOp::kSum) {
    checkSizes("reduce_scatter", in.size(), out.size() * static_cast<size_t>(size()));
    return reduceScatter(in.data(), out.data(), out.size(), dataTypeOf<T>, op);
  }
  // out holds size() * in.size() elements; block r comes from rank r.
  template <class T>
  Work allGather(std::span<const T> in, std::span<T> out) {
    checkSizes("all_gather", in.size() * static_cast<size_t>(size()), out.size());
    return allGather(in.data(), out.data(), in.size(), dataTypeOf<T>);
  }
  template <class T>
  Work broadcast(std::span<T> buf, int root) {
    return broadcast(buf.data(), buf.size(), dataTypeOf<T>, root);
  }
  Work barrier(Run run = Run::kInBackground);

  // ---- Reduce, gather, scatter, the per-rank-count variants and all-to-all ----
  // Ordered and checked like the collectives above. Buffers that matter only on the root may be
  // empty (null) elsewhere. In place, as with MPI_IN_PLACE, means passing the same memory where
  // noted; any other overlap of send and receive buffers is an error (kInvalidArgument).

  // The root receives the reduction of every rank's `in`. In place on the root: in == out.
  template <class T>
  Work reduce(std::span<const T> in, std::span<T> out, int root, ReduceOp op = ReduceOp::kSum) {
    if (rank() == root) checkSizes("reduce", in.size(), out.size());
    return reduce(in.data(), out.data(), in.size(), dataTypeOf<T>, op, root);
  }
  template <class T>
  Work reduce(std::span<T> inout, int root, ReduceOp op = ReduceOp::kSum) {
    return reduce(inout.data(), inout.data(), inout.size(), dataTypeOf<T>, op, root);
  }
  // The root's out holds size() * in.size() elements; block r comes from rank r. In place on the
  // root: in is block root of out.
  template <class T>
  Work gather(std::span<const T> in, std::span<T> out, int root) {
    if (rank() == root) checkSizes("gather", in.size() * static_cast<size_t>(size()), out.size());
    return gather(in.data(), out.data(), in.size(), dataTypeOf<T>, root);
  }
  // The root's in holds size() * out.size() elements; rank r receives block r. In place on the
  // root: out is block root of in.
  template <class T>
  Work scatter(std::span<const T> in, std::span<T> out, int root) {
    if (rank() == root) checkSizes("scatter", out.size() * static_cast<size_t>(size()), in.size());
    return scatter(in.data(), out.data(), out.size(), dataTypeOf<T>, root);
  }
  // counts[r] elements from rank r (every rank passes the same counts; in holds counts[rank()]),
  // laid out one after another in out in rank order. In place: in is this rank's block of out.
  template <class T>
  Work allGatherV(std::span<const T> in, std::span<T> out, std::span<const size_t> counts) {
    checkCounts("all_gather_v", counts);
    checkSizes("all_gather_v", counts[static_cast<size_t>(rank())], in.size());
    checkSizes("all_gather_v", sum(counts), out.size());
    return allGatherV(in.data(), out.data(), counts.data(), dataTypeOf<T>);
  }
  // in holds the blocks of counts[0], counts[1], ... elements; rank r receives the reduction of
  // block r (counts[r] elements). In place: out is this rank's block of in.
  template <class T>
  Work reduceScatterV(std::span<const T> in, std::span<T> out, std::span<const size_t> counts,
                      ReduceOp op = ReduceOp::kSum) {
    checkCounts("reduce_scatter_v", counts);
    checkSizes("reduce_scatter_v", sum(counts), in.size());
    checkSizes("reduce_scatter_v", counts[static_cast<size_t>(rank())], out.size());
    return reduceScatterV(in.data(), out.data(), counts.data(), dataTypeOf<T>, op);
  }
  // in and out hold size() blocks of the same size: block r of in goes to rank r, block r of out
  // comes from rank r. In place: in == out.
  template <class T>
  Work allToAll(std::span<const T> in, std::span<T> out) {
    checkSizes("all_to_all", in.size(), out.size());
    const auto n = static_cast<size_t>(size());
    if (in.size() % n != 0) checkSizes("all_to_all", in.size() / n * n, in.size());
    return allToAll(in.data(), out.data(), in.size() / n, dataTypeOf<T>);
  }
  // sendCounts[r] elements to rank r, recvCounts[r] from it, blocks in rank order (rank r's
  // recvCounts[q] must equal rank q's sendCounts[r]). No in-place form.
  template <class T>
  Work allToAllV(std::span<const T> in, std::span<const size_t> sendCounts, std::span<T> out,
                 std::span<const size_t> recvCounts) {
    checkCounts("all_to_all_v", sendCounts);
    checkCounts("all_to_all_v", recvCounts);
    checkSizes("all_to_all_v", sum(sendCounts), in.size());
    checkSizes("all_to_all_v", sum(recvCounts), out.size());
    return allToAllV(in.data(), sendCounts.data(), out.data(), recvCounts.data(), dataTypeOf<T>);
  }
  // A message to / from one other rank. Only the two ranks take part; each places the call at
  // the same point among its collectives (between the same two collectives), and a pair's
  // messages arrive in the order they were sent. The sends and receives issued between the same
  // two collectives run together, so each rank may issue them in any order (receives first on
  // both ranks included), as long as it does not wait for one before it has issued those the
  // peer needs first. A send may finish before the matching recv starts, except for messages
  // larger than the transport buffers (shared-memory ring, socket buffers). The sizes must match
  // (kMismatch).
  template <class T>
  Work send(std::span<const T> buf, int peer) {
    return send(buf.data(), buf.size(), dataTypeOf<T>, peer);
  }
  template <class T>
  Work recv(std::span<T> buf, int peer) {
    return recv(buf.data(), buf.size(), dataTypeOf<T>, peer);
  }
  Work send(const void* buf, size_t count, DataType type, int peer, Run run = Run::kInBackground);
  Work recv(void* buf, size_t count, DataType type, int peer, Run run = Run::kInBackground);

  // Untyped forms, with the argument rules of the C API (counts: size() entries).
  Work reduce(const void* in, void* out, size_t count, DataType type, ReduceOp op, int root,
              Run run = Run::kInBackground);
  Work gather(const void* in, void* out, size_t sendCount, DataType type, int root,
              Run run = Run::kInBackground);
  Work scatter(const void* in, void* out, size_t recvCount, DataType type, int root,
               Run run = Run::kInBackground);
  Work allGatherV(const void* in, void* out, const size_t* counts, DataType type,
                  Run run = Run::kInBackground);
  Work reduceScatterV(const void* in, void* out, const size_t* counts, DataType type, ReduceOp op,
                      Run run = Run::kInBackground);
  Work allToAll(const void* in, void* out, size_t count, DataType type,
                Run run = Run::kInBackground);
  Work allToAllV(const void* in, const size_t* sendCounts, void* out, const size_t* recvCounts,
                 DataType type, Run run = Run::kInBackground);

  // Collective over this communicator, ordered like any other collective on it, and blocking:
  // ranks that pass the same color form a new communicator, ranked by (key, rank here). A
  // negative color (kNoColor) joins none and returns nullptr, but the call must still be made.
  // The new communicator inherits options() and is independent of this one (either may be used
  // or destroyed first). Throws Error ("split (rank R): ...") on failure or timeout.
  std::unique_ptr<Communicator> split(int color, int key);
  // The same, with the new communicator's own options (its members must agree on the algorithm
  // settings, as on any communicator).
  std::unique_ptr<Communicator> split(int color, int key, const Options& options);

  // Untyped forms, with the argument rules of the C API; `run` as described at Run.
  Work allReduce(const void* in, void* out, size_t count, DataType type, ReduceOp op,
                 Run run = Run::kInBackground);
  // ---- Reduced-precision wire formats (docs/api.md) ----
  // The all-reduce with per-call options: call.wire other than kNative (f32 with sum or avg
  // only, else Error(kInvalidArgument)) sends bf16, fp16 or block-int8 between ranks, reduces in
  // f32, and gives every rank the same bits. Every rank must pass the same options (kMismatch).
  Work allReduce(const void* in, void* out, size_t count, DataType type, ReduceOp op,
                 const CallOptions& call, Run run = Run::kInBackground);
  template <class T>
  Work allReduce(std::span<T> inout, ReduceOp op, const CallOptions& call) {
    return allReduce(inout.data(), inout.data(), inout.size(), dataTypeOf<T>, op, call);
  }
  // Payload bytes this rank has handed to its links since creation (all collectives, all
  // peers), as they travel: a wire format's bytes, not the data's. Callable from any thread.
  uint64_t bytesSent() const;
  Work reduceScatter(const void* in, void* out, size_t recvCount, DataType type, ReduceOp op,
                     Run run = Run::kInBackground);
  Work allGather(const void* in, void* out, size_t sendCount, DataType type,
                 Run run = Run::kInBackground);
  Work broadcast(void* buf, size_t count, DataType type, int root, Run run = Run::kInBackground);

  // Callable from any thread, also while another is inside a call on this communicator: the
  // operation in progress, every queued one and every later one fail promptly with kAborted, and
  // the peers are told (their calls fail naming this rank). Closes every connection. Never
  // blocks long.
  void abort();
  // The error that aborted this communicator, or nullptr: also a failure in background work that
  // nobody waited on yet, and an abort() (kAborted) from the moment it is called. Never blocks.
  std::exception_ptr abortCause() const;

  // ---- Membership (docs/fault-tolerance.md) ----

  // 0 for a communicator made by create()/fromEnv()/split(); each shrink() or join() result is
  // one more than the communicator it replaces.
  uint64_t generation() const;
  // Ranks of this communicator known to have failed so far (dead, timed out, or declared dead by
  // an agreement), ascending. Never blocks.
  std::vector<int> failedRanks() const;
  // Collective among the live ranks of this communicator, callable after a call on it failed
  // (kPeerFailure, kTimeout, kAborted) or when nothing failed. They agree on one set of live
  // ranks (and admit the newcomers waiting to join, see join()) and get a new communicator:
  // survivors keep their relative order, newcomers come after them. Every caller gets the same
  // membership or an Error; it ends within options().timeout even if more ranks die meanwhile.
  // This communicator is aborted by the call (its connections close; destroy it as usual), and
  // failedRanks() then lists every rank not kept. A rank the others declared dead gets
  // Error(kPeerFailure, "... rank R was declared dead by the survivors ..."). Only for a
  // communicator made by create()/fromEnv() or by an earlier shrink()/join() (not a split).
  std::unique_ptr<Communicator> shrink();
  // The same, where the caller knows of more ranks that are gone or leaving than failedRanks()
  // says (a group built on this communicator whose failures it never saw: the members of a
  // broken replica group, say): the agreement waits for none of `gone` to register, as for a
  // rank known dead; one that registers all the same is kept. Ranks outside 0..size-1 are
  // ignored.
  std::unique_ptr<Communicator> shrink(const std::vector<int>& gone);
  // For each rank of this communicator, its rank in the communicator it was made from by
  // shrink() or join(); -1 for a newcomer. For a communicator from create(): 0..size-1.
  std::vector<int> formerRanks() const;
  // Newcomers waiting to join at the next membership change (reads the store; not collective,
  // so ranks may see different values: agree on it with a collective before acting on it).
  int joinersWaiting() const;
  // Newcomers waiting beyond that room: spares of a full job (chorus-run --spares), which take
  // the places of the next ranks lost (a store read, as above).
  int sparesWaiting() const;
  // Stall check (docs/fault-tolerance.md, "Heartbeat"): while this rank has waited in a call for
  // `seconds`, a peer that is alive (its heartbeat fresh) but has been in no call of this
  // communicator for as long (its loop stuck outside the collectives: a data loader, a deadlock
  // of its own) is declared dead as a silent one is (the call fails with kPeerFailure naming
  // it; shrink() does not wait for it). 0 (default): off. May change at any time, e.g. on only
  // inside a training step. Needs the heartbeat (CHORUS_HEARTBEAT_SECONDS): kInvalidArgument
  // without it.
  void setStallTimeout(double seconds);
  // This rank says it is away from the collectives on purpose (saving a checkpoint, evaluating
  // alone): its progress record says so and its peers' stall checks pass it over until false.
  void setPaused(bool paused);

  // Flight recorder (docs/trace-format.md): writes this rank's record of its recent calls as
  // <dir>/chorus-trace-<communicator>-rank<R>.json (dir empty: CHORUS_TRACE_DIR) and returns that
  // path. Reads the record without locks: callable from any thread, also while a call on this
  // communicator is stuck. Throws Error(kInvalidArgument) when the recorder is off
  // (CHORUS_TRACE_ENTRIES=0) or no directory is known, kSystem when the file cannot be written.
  std::string dumpTrace(const std::string& dir = "") const;
  // The straggler statistics of this communicator so far (see StragglerReport). Never blocks;
  // empty when the recorder is off.
  StragglerReport stragglerReport() const;

  // ---- Registered memory (docs/api/mainpage.md, "Registered memory") ----

  // A buffer in shared memory that the ranks of this host read in place: collectives whose
  // buffers are all registered on every rank of a one-host communicator skip the copies through
  // the shared-memory rings; other buffers (and mixes) take the usual path. Zero-filled,
  // page-aligned. Belongs to the process (any communicator may use it); this communicator
  // accounts for it: free it before destroying the communicator, which otherwise reports it
  // on stderr. Throws Error (kInvalidArgument for 0 bytes, kSystem when the kernel refuses).
  void* allocate(size_t bytes);
  // Frees a buffer from allocate(). Throws Error(kInvalidArgument) when p is not one, or while a
  // collective in flight uses it (nothing is freed then: wait for the Work and retry).
  void deallocate(void* p);

 private:
  struct CHORUS_HIDDEN Impl;  // src/core/communicator_impl.h
  CHORUS_HIDDEN explicit Communicator(std::shared_ptr<Impl> impl);
  CHORUS_HIDDEN static std::unique_ptr<Communicator> joinVia(std::shared_ptr<Store> store,
                                                             const std::string& route,
                                                             Options options);
  static void checkSizes(const char* op, size_t expected, size_t got);
  void checkCounts(const char* op, std::span<const size_t> counts) const;
  static size_t sum(std::span<const size_t> counts);
  std::shared_ptr<Impl> impl_;  // shared with Work handles that may run a task inline
  // Defined by the library only (src/core/communicator_access.h): its way to Impl and impl_.
  friend struct CommunicatorAccess;
};

// A registered buffer of `count` elements of T, freed when it goes out of scope (which must be
// before the communicator's destruction; a free that fails because a call still uses the buffer
// leaves it allocated).
template <class T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(Communicator& comm, size_t count)
      : comm_(&comm), data_(static_cast<T*>(comm.allocate(count * sizeof(T)))), count_(count) {}
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    Buffer(std::move(o)).swap(*this);
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (data_ == nullptr) return;
    try {
      comm_->deallocate(data_);
    } catch (...) {
    }
  }

  T* data() const { return data_; }
  size_t size() const { return count_; }
  std::span<T> span() const { return {data_, count_}; }
  T* begin() const { return data_; }
  T* end() const { return data_ + count_; }
  T& operator[](size_t i) const { return data_[i]; }

 private:
  void swap(Buffer& o) noexcept {
    std::swap(comm_, o.comm_);
    std::swap(data_, o.data_);
    std::swap(count_, o.count_);
  }
  Communicator* comm_ = nullptr;
  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace chorus
