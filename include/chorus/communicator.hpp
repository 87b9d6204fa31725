// The communicator: a group of ranks and the collectives they run together.
#pragma once

#include <chorus/error.hpp>
#include <chorus/options.hpp>
#include <chorus/store.hpp>
#include <chorus/types.hpp>
#include <chorus/work.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace chorus {

// Color for Communicator::split (any negative value works): this rank joins no new communicator.
inline constexpr int kNoColor = -1;

// Every rank must issue the same collectives in the same order. Each call returns at once with a
// Work; the operation runs on the communicator's worker thread, or on the caller's own thread
// when it waits on the Work before the worker has started it (a blocking call on an idle
// communicator: `comm->allReduce(x).wait()` costs no thread handoff). A failure (lost peer,
// timeout, mismatched calls) aborts the communicator: the failing and every later operation throw.
class Communicator {
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
  // The same with these options (instead of Options::fromEnv()).
  static std::unique_ptr<Communicator> fromEnv(Options options);

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  const Options& options() const;
  // Algorithm chosen for the most recently issued collective ("ring", "rd", "rhd", "chain",
  // "dissemination", or "none" for a group of one); "" before the first.
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
  Work barrier();

  // Collective over this communicator, ordered like any other collective on it, and blocking:
  // ranks that pass the same color form a new communicator, ranked by (key, rank here). A
  // negative color (kNoColor) joins none and returns nullptr, but the call must still be made.
  // The new communicator inherits options() and is independent of this one (either may be used
  // or destroyed first). Throws Error ("split (rank R): ...") on failure or timeout.
  std::unique_ptr<Communicator> split(int color, int key);
  // The same, with the new communicator's own options (its members must agree on the algorithm
  // settings, as on any communicator).
  std::unique_ptr<Communicator> split(int color, int key, const Options& options);

  // Untyped forms, with the argument rules of the C API.
  Work allReduce(const void* in, void* out, size_t count, DataType type, ReduceOp op);
  Work reduceScatter(const void* in, void* out, size_t recvCount, DataType type, ReduceOp op);
  Work allGather(const void* in, void* out, size_t sendCount, DataType type);
  Work broadcast(void* buf, size_t count, DataType type, int root);

  // Callable from any thread, also while another is inside a call on this communicator: the
  // operation in progress, every queued one and every later one fail promptly with kAborted, and
  // the peers are told (their calls fail naming this rank). Closes every connection. Never
  // blocks long.
  void abort();
  // The error that aborted this communicator, or nullptr: also a failure in background work that
  // nobody waited on yet, and an abort() (kAborted) from the moment it is called. Never blocks.
  std::exception_ptr abortCause() const;

  struct Impl;

 private:
  explicit Communicator(std::shared_ptr<Impl> impl);
  static void checkSizes(const char* op, size_t expected, size_t got);
  std::shared_ptr<Impl> impl_;  // shared with Work handles that may run a task inline
};

}  // namespace chorus
