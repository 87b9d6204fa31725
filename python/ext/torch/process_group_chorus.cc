#include "process_group_chorus.h"

#include "../common/signal_wait.h"
#include "launcher_store.h"
#include "no_gil.h"
#include "signal_abort.h"
#include "store_bridge.h"
#include "tensor_args.h"
#include "tensor_staging.h"
#include "timeout_rule.h"

#include <chorus/error.hpp>
#include <chorus/options.hpp>

#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <sstream>
#include <thread>

namespace chorus::torch_backend {
namespace {

// The store the communicator meets its peers through. A group of one has none to meet: it keeps
// to a store of its own, since torch may give two such groups the same name, and so the same
// store prefix (new_subgroups(group_size=1, group=...) on disjoint parents).
std::shared_ptr<Store> storeFor(const c10::intrusive_ptr<c10d::Store>& store, int size) {
  return size == 1 ? makeHashStore() : bridgeStore(store);
}

// A Chorus failure at issue time is a misuse found on this rank: torch's ValueError for a bad
// argument, RuntimeError otherwise.
[[noreturn]] void rethrowIssueError(const Error& e) {
  if (e.code() == ErrorCode::kInvalidArgument) {
    TORCH_CHECK_VALUE(false, "chorus backend: ", e.what());
  }
  TORCH_CHECK(false, "chorus backend: ", e.what());
}

// The backend's heartbeat timeout where CHORUS_HEARTBEAT_SECONDS is not set.
constexpr double kDefaultHeartbeatSeconds = 5;

}  // namespace

ProcessGroupChorus::ProcessGroupChorus(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, std::chrono::milliseconds timeout,
                                       std::vector<int64_t> globalRanks, std::string groupName)
    : BackendBase(rank, size),
      store_(storeFor(store, size)),
      timeout_(timeout),
      globalRanks_(std::move(globalRanks)),
      groupName_(std::move(groupName)),
      handle_(newReconfigureHandle()) {
  chorus::Options options;
  try {
    options = chorus::Options::fromEnv();
    timeout_ = chooseTimeout(timeout, describeGroup(), rank);
    options.timeout = timeout_;
    options.progressStore = launcherStore(rank, options.auth);
    // A stopped or frozen rank is declared dead after a few seconds here, not after the group's
    // timeout: an elastic job goes on without it (CHORUS_HEARTBEAT_SECONDS=0 turns it off).
    if (!std::getenv("CHORUS_HEARTBEAT_SECONDS")) {
      options.trace.heartbeatSeconds = kDefaultHeartbeatSeconds;
    }
    signalAbort_ = std::make_shared<SignalAbort>(this);
    meetStore_ = store_;
    if (auto job = jobStoreFor(globalRanks_, size, options.progressStore)) {
      meetStore_ = job;
      launcher_ = options.progressStore;
    }
    if (joinsRunningJob(globalRanks_, size)) {
      // A replacement joins when it is ready to take its state (joinNow), not here: the
      // running ranks would wait for it from its admission on.
      joinOptions_ = options;
    } else {
      comm_ = Communicator::create(meetStore_, rank, size, options);
    }
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "chorus backend: creating ", describeGroup(), " failed on rank ", rank, ": ",
                e.what());
  }
  init();
}

ProcessGroupChorus::~ProcessGroupChorus() {
  if (signalAbort_) signalAbort_->detach();
  const NoGil noGil;
  comm_.reset();
  completer_.reset();
}

Communicator& ProcessGroupChorus::communicator(const char* op) const {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(!joinOptions_, "chorus backend: ", op, " on ", describeGroup(),
              " before this replacement (CHORUS_JOIN=1) joined the running job: call "
              "chorus.torch.join() first (chorus.torch.elastic.Trainer does)");
  TORCH_CHECK(!closed_ && comm_, "chorus backend: ", op, " on ", describeGroup(),
              ", which was shut down (destroy_process_group)");
  return *comm_;
}

void ProcessGroupChorus::abortGroup() {
  std::lock_guard<std::mutex> lock(mu_);
  if (comm_) comm_->abort();
}

#if CHORUS_TORCH_BACKEND_ABORT
void ProcessGroupChorus::shutdown() {
  chorus::Work last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    last = lastPart_;
  }
  const NoGil noGil;
  try {
    last.wait();  // operations complete in issue order: this one ends last
  } catch (...) {
    // Its failure belongs to its own Work.
  }
  std::unique_ptr<Communicator> comm;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    lastPart_ = chorus::Work();
    comm = std::move(comm_);
  }
  comm.reset();
}
#endif

std::string ProcessGroupChorus::describeGroup() const {
  std::ostringstream s;
  s << "process group";
  if (!groupName_.empty()) s << " '" << groupName_ << "'";
  s << " of " << getSize() << " ranks";
  if (!globalRanks_.empty() && static_cast<int>(globalRanks_.size()) == getSize()) {
    bool identity = true;
    for (size_t i = 0; i < globalRanks_.size(); ++i) {
      identity = identity && globalRanks_[i] == static_cast<int64_t>(i);
    }
    if (!identity) {
      s << " (global ranks";
      for (auto r : globalRanks_) s << ' ' << r;
      s << ")";
    }
  }
  return s.str();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::launch(
    c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
    std::vector<at::Tensor> keepAlive, std::function<void()> copyOut,
    const std::function<chorus::Work(Run)>& issue, std::shared_ptr<void> extra, int source,
    Run run) {
  if (run == Run::kBlocking) {
    std::lock_guard<std::mutex> lock(mu_);
    if (coalescing_) run = Run::kInBackground;  // endCoalescing's Work is the one waited for
  }
  if (run == Run::kInBackground) {
    return launchParts(
        type, title, std::move(outputs), std::move(keepAlive), std::move(copyOut),
        [&](std::vector<chorus::Work>& parts) { parts.push_back(issue(Run::kInBackground)); },
        std::move(extra), source);
  }
  // Torch waits at once: run it here, on the caller's thread, as the C API's blocking calls do.
  communicator(title);  // a clear error after shutdown()
  auto work = c10::make_intrusive<WorkChorus>(getRank(), type, title, std::move(outputs),
                                              std::move(keepAlive), std::move(copyOut), completer_);
  work->holdAlso(std::move(extra));
  work->setSourceRank(source);
  chorus::Work done;
  try {
    // Ctrl-C meanwhile aborts the group, which ends the call at once; wait() then raises
    // KeyboardInterrupt (python/ext/common/signal_wait.h).
    const python_signals::BlockingSection interruptible(SignalAbort::callback(signalAbort_));
    done = issue(Run::kBlocking);
  } catch (const Error& e) {
    // A misuse found before the operation started throws from the call, as in the background;
    // a failure while it ran belongs to the Work, which wait() rethrows.
    if (e.code() == ErrorCode::kInvalidArgument) rethrowIssueError(e);
    ++sequence_;
    work->fail(std::current_exception());
    return work;
  }
  ++sequence_;
  WorkChorus::attach(work, {done});  // finished: the copy-out runs now, on this thread
  std::lock_guard<std::mutex> lock(mu_);
  lastPart_ = done;
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::launchParts(
    c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
    std::vector<at::Tensor> keepAlive, std::function<void()> copyOut,
    const std::function<void(std::vector<chorus::Work>&)>& issue, std::shared_ptr<void> extra,
    int source) {
  communicator(title);  // a clear error after shutdown()
  auto work = c10::make_intrusive<WorkChorus>(getRank(), type, title, std::move(outputs),
                                              std::move(keepAlive), std::move(copyOut), completer_);
  work->holdAlso(std::move(extra));
  work->setSourceRank(source);
  work->setOnSignal(SignalAbort::callback(signalAbort_));
  std::vector<chorus::Work> parts;
  auto tie = [&] {
    ++sequence_;
    const chorus::Work last = parts.back();
    WorkChorus::attach(work, std::move(parts));
    std::lock_guard<std::mutex> lock(mu_);
    lastPart_ = last;
    if (coalescing_) batch_.push_back(work);
  };
  try {
    issue(parts);
  } catch (...) {
    if (!parts.empty()) tie();  // what was issued runs on: keep its buffers alive
    try {
      throw;
    } catch (const Error& e) {
      rethrowIssueError(e);
    }
  }
  tie();
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors[0].is_sparse()) return allreduceSparse(tensors[0], opts);
  checkSingle(tensors, "allreduce");
  at::Tensor t = tensors[0];
  const Reduction red = reductionFor(t, opts.reduceOp, "allreduce");
  at::Tensor buf = contiguousOf(t);
  if (red.premul) buf.mul_(*red.premul);  // buf is the output: scaling it in place is fine
  auto copyOut = copyBack(t, buf);
  return launch(
      c10d::OpType::ALLREDUCE, "chorus:all_reduce", {t}, {buf}, std::move(copyOut),
      [&](Run run) {
        return comm_->allReduce(buf.data_ptr(), buf.data_ptr(), static_cast<size_t>(buf.numel()),
                                red.type, red.op, run);
      },
      nullptr, -1, runFor(opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK_VALUE(!tensors.empty(), "chorus backend: allreduce_coalesced got no tensors");
  for (const auto& t : tensors) checkCpuDense(t, "allreduce_coalesced");
  // One flat buffer and one all-reduce per dtype.
  struct Group {
    at::Tensor flat;
    Reduction red;
  };
  std::vector<Group> groups;
  std::vector<at::Tensor> keep;
  std::vector<std::function<void()>> copies;
  for (const auto& idx : byDtype(tensors)) {
    const auto members = pick(tensors, idx);
    const Reduction red = reductionFor(members[0], opts.reduceOp, "allreduce_coalesced");
    const size_t bytes = totalBytes(members);
    at::Tensor flat =
        at::empty({static_cast<int64_t>(bytes / members[0].element_size())}, members[0].options());
    packInto(bytesOf(flat), members);
    if (red.premul) flat.mul_(*red.premul);
    groups.push_back({flat, red});
    keep.push_back(flat);
    copies.push_back(unpackInto(members, flat));
  }
  auto copyOut = [copies = std::move(copies)] {
    for (const auto& c : copies) c();
  };
  return launchParts(c10d::OpType::ALLREDUCE_COALESCED, "chorus:all_reduce_coalesced", tensors,
                     std::move(keep), std::move(copyOut), [&](std::vector<chorus::Work>& parts) {
                       for (const auto& g : groups) {
                         parts.push_back(comm_->allReduce(g.flat.data_ptr(), g.flat.data_ptr(),
                                                          static_cast<size_t>(g.flat.numel()),
                                                          g.red.type, g.red.op));
                       }
                     });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  checkSingle(tensors, "broadcast");
  checkRoot(opts.rootRank, opts.rootTensor, getSize(), "broadcast");
  at::Tensor t = tensors[0];
  at::Tensor buf = contiguousOf(t);
  // The root's tensor is only read.
  auto copyOut = opts.rootRank == getRank() ? nullptr : copyBack(t, buf);
  const int root = static_cast<int>(opts.rootRank);
  return launch(
      c10d::OpType::BROADCAST, "chorus:broadcast", {t}, {buf}, std::move(copyOut),
      [&](Run run) {
        return comm_->broadcast(buf.data_ptr(), byteCount(buf), DataType::kU8, root, run);
      },
      nullptr, -1, runFor(opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  checkSingle(tensors, "reduce");
  checkRoot(opts.rootRank, opts.rootTensor, getSize(), "reduce");
  at::Tensor t = tensors[0];
  const Reduction red = reductionFor(t, opts.reduceOp, "reduce");
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = root == getRank();
  at::Tensor buf;
  if (isRoot) {
    buf = contiguousOf(t);
    if (red.premul) buf.mul_(*red.premul);
  } else {
    // Other ranks keep their tensor: a scaled or contiguous copy is sent instead.
    buf = red.premul ? t.mul(*red.premul).contiguous() : contiguousOf(t);
  }
  auto copyOut = isRoot ? copyBack(t, buf) : nullptr;
  return launch(
      c10d::OpType::REDUCE, "chorus:reduce", {t}, {buf}, std::move(copyOut),
      [&](Run run) {
        return comm_->reduce(buf.data_ptr(), isRoot ? buf.data_ptr() : nullptr,
                             static_cast<size_t>(buf.numel()), red.type, red.op, root, run);
      },
      nullptr, -1, runFor(opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  checkSingle(inputs, "allgather");
  TORCH_CHECK_VALUE(outputs.size() == 1, "chorus backend: allgather takes one output list, got ",
                    outputs.size());
  const at::Tensor in = contiguousOf(inputs[0]);
  checkList(outputs[0], static_cast<size_t>(getSize()), in, "allgather", "the output list");
  const size_t block = byteCount(in);
  at::Tensor flat = byteBuffer(block * static_cast<size_t>(getSize()));
  std::vector<at::Tensor> outs = outputs[0];
  auto copyOut = unpackInto(outs, flat);
  return launch(
      c10d::OpType::ALLGATHER, "chorus:all_gather", outputs[0], {in, flat}, std::move(copyOut),
      [&](Run run) {
        return comm_->allGather(in.data_ptr(), flat.data_ptr(), block, DataType::kU8, run);
      },
      nullptr, -1, runFor(opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  checkFlatPair(output, input, getSize(), "all_gather_into_tensor", "output");
  const at::Tensor in = contiguousOf(input);
  at::Tensor out = contiguousOf(output);
  auto copyOut = copyBack(output, out);
  return launch(
      c10d::OpType::_ALLGATHER_BASE, "chorus:all_gather_into_tensor", {output}, {in, out},
      std::move(copyOut),
      [&](Run run) {
        return comm_->allGather(in.data_ptr(), out.data_ptr(), byteCount(in), DataType::kU8, run);
      },
      nullptr, -1, runFor(opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  const auto n = static_cast<size_t>(getSize());
  TORCH_CHECK_VALUE(outputLists.size() == n, "chorus backend: allgather_coalesced takes ", n,
                    " output lists (one per rank), got ", outputLists.size());
  for (const auto& t : inputs) checkCpuDense(t, "allgather_coalesced");
  for (const auto& list : outputLists) {
    TORCH_CHECK_VALUE(list.size() == inputs.size(),
                      "chorus backend: allgather_coalesced: an output list holds ", list.size(),
                      " tensors, expected ", inputs.size());
    for (size_t i = 0; i < list.size(); ++i) {
      checkCpuDense(list[i], "allgather_coalesced");
      TORCH_CHECK_VALUE(
          list[i].scalar_type() == inputs[i].scalar_type() && list[i].numel() == inputs[i].numel(),
          "chorus backend: allgather_coalesced: output tensor ", i, " does not match input tensor ",
          i, " in dtype and size");
    }
  }
  const size_t block = totalBytes(inputs);
  at::Tensor in = byteBuffer(block);
  packInto(bytesOf(in), inputs);
  at::Tensor flat = byteBuffer(block * n);
  std::vector<at::Tensor> all;
  for (const auto& list : outputLists) all.insert(all.end(), list.begin(), list.end());
  auto copyOut = unpackInto(all, flat);
  return launch(c10d::OpType::ALLGATHER_COALESCED, "chorus:all_gather_coalesced", all, {in, flat},
                std::move(copyOut), [&](Run run) {
                  return comm_->allGather(in.data_ptr(), flat.data_ptr(), block, DataType::kU8,
                                          run);
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  checkSingle(inputs, "gather");
  checkRank(opts.rootRank, getSize(), "gather", "root rank");
  const int root = static_cast<int>(opts.rootRank);
  const at::Tensor in = contiguousOf(inputs[0]);
  const size_t block = byteCount(in);
  at::Tensor flat;
  std::vector<at::Tensor> outs;
  std::function<void()> copyOut;
  if (root == getRank()) {
    TORCH_CHECK_VALUE(outputs.size() == 1,
                      "chorus backend: gather: the root takes one output "
                      "list, got ",
                      outputs.size());
    checkList(outputs[0], static_cast<size_t>(getSize()), in, "gather", "the output list");
    outs = outputs[0];
    flat = byteBuffer(block * static_cast<size_t>(getSize()));
    copyOut = unpackInto(outs, flat);
  } else {
    TORCH_CHECK_VALUE(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                      "chorus backend: gather: only the root (rank ", root,
                      ") passes an output list");
  }
  return launch(
      c10d::OpType::GATHER, "chorus:gather", outs, {in, flat}, std::move(copyOut),
      [&](Run run) {
        return comm_->gather(in.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr, block,
                             DataType::kU8, root, run);
      },
      nullptr, -1, runFor(opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  checkSingle(outputs, "scatter");
  checkRank(opts.rootRank, getSize(), "scatter", "root rank");
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor out = outputs[0];
  at::Tensor buf = contiguousOf(out);
  at::Tensor flat;
  if (root == getRank()) {
    TORCH_CHECK_VALUE(inputs.size() == 1,
                      "chorus backend: scatter: the root takes one input "
                      "list, got ",
                      inputs.size());
    checkList(inputs[0], static_cast<size_t>(getSize()), out, "scatter", "the input list");
    flat = byteBuffer(byteCount(out) * static_cast<size_t>(getSize()));
    packInto(bytesOf(flat), inputs[0]);
  } else {
    TORCH_CHECK_VALUE(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                      "chorus backend: scatter: only the root (rank ", root,
                      ") passes an input list");
  }
  auto copyOut = copyBack(out, buf);
  return launch(
      c10d::OpType::SCATTER, "chorus:scatter", {out}, {buf, flat}, std::move(copyOut),
      [&](Run run) {
        return comm_->scatter(flat.defined() ? flat.data_ptr() : nullptr, buf.data_ptr(),
                              byteCount(buf), DataType::kU8, root, run);
      },
      nullptr, -1, runFor(opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  checkSingle(outputs, "reduce_scatter");
  TORCH_CHECK_VALUE(inputs.size() == 1,
                    "chorus backend: reduce_scatter takes one input list, "
                    "got ",
                    inputs.size());
  at::Tensor out = outputs[0];
  checkList(inputs[0], static_cast<size_t>(getSize()), out, "reduce_scatter", "the input list");
  const Reduction red = reductionFor(out, opts.reduceOp, "reduce_scatter");
  at::Tensor flat = at::empty({out.numel() * getSize()}, out.options());
  packInto(bytesOf(flat), inputs[0]);
  if (red.premul) flat.mul_(*red.premul);
  at::Tensor buf = contiguousOf(out);
  auto copyOut = copyBack(out, buf);
  return launch(
      c10d::OpType::REDUCE_SCATTER, "chorus:reduce_scatter", {out}, {buf, flat}, std::move(copyOut),
      [&](Run run) {
        return comm_->reduceScatter(flat.data_ptr(), buf.data_ptr(),
                                    static_cast<size_t>(buf.numel()), red.type, red.op, run);
      },
      nullptr, -1, runFor(opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  checkFlatPair(input, output, getSize(), "reduce_scatter_tensor", "input");
  const Reduction red = reductionFor(output, opts.reduceOp, "reduce_scatter_tensor");
  const at::Tensor in = red.premul ? input.mul(*red.premul).contiguous() : contiguousOf(input);
  at::Tensor out = contiguousOf(output);
  auto copyOut = copyBack(output, out);
  return launch(
      c10d::OpType::_REDUCE_SCATTER_BASE, "chorus:reduce_scatter_tensor", {output}, {in, out},
      std::move(copyOut),
      [&](Run run) {
        return comm_->reduceScatter(in.data_ptr(), out.data_ptr(), static_cast<size_t>(out.numel()),
                                    red.type, red.op, run);
      },
      nullptr, -1, runFor(opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::barrier(const c10d::BarrierOptions& opts) {
  return launch(
      c10d::OpType::BARRIER, "chorus:barrier", {}, {}, nullptr,
      [&](Run run) { return comm_->barrier(run); }, nullptr, -1, runFor(opts));
}

// monitoredBarrier: monitored_barrier.cc. The sparse all_reduce: sparse_allreduce.cc.

}  // namespace chorus::torch_backend
