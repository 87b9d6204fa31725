#include "work_chorus.h"

#include "../common/signal_wait.h"
#include "error_text.h"

#include <c10/util/Exception.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <string>

namespace chorus::torch_backend {
namespace {

using Clock = std::chrono::steady_clock;

// torch 1.13 has no coalescing batches (nor their op type); WorkBatch is used from 2.x on.
#if TORCH_VERSION_MAJOR >= 2
constexpr auto kBatchOp = c10d::OpType::COALESCED;
#else
constexpr auto kBatchOp = c10d::OpType::UNKNOWN;
#endif

// What is left of a wait's budget; kNoTimeout stays "no limit". Never zero (zero means no limit).
std::chrono::milliseconds remainingOf(std::chrono::milliseconds timeout, Clock::time_point start) {
  if (timeout == kNoTimeout) return kNoTimeout;
  const auto left =
      timeout - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  return std::max(left, std::chrono::milliseconds(1));
}

// Waits for one part at most `left` (kNoTimeout: no limit); false when that passed first. On
// Python's main thread a signal handler that raises (Ctrl-C) ends the wait: onSignal aborts the
// group (python/ext/common/signal_wait.h).
bool waitPart(const chorus::Work& part, std::chrono::milliseconds left,
              const std::function<void()>& onSignal) {
  namespace sig = python_signals;
  if (left != kNoTimeout) {
    if (!sig::handlesSignals()) return part.wait(left);
    return sig::waitInterruptibly(
        [&part](std::chrono::milliseconds slice) { return part.wait(slice); }, left, onSignal);
  }
  if (!sig::handlesSignals()) {
    part.wait();  // may run the operation right here
    return true;
  }
  // The watcher that runs onSignal needs the GIL to see Python's handler.
  PyThreadState* saved = PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  try {
    const sig::BlockingSection section(onSignal);
    part.wait();
  } catch (...) {
    if (saved) PyEval_RestoreThread(saved);
    throw;
  }
  if (saved) PyEval_RestoreThread(saved);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> newTensorListFuture() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

}  // namespace

// ---- WorkBase ----

WorkBase::WorkBase(int rank, c10d::OpType type, const char* profilingTitle,
                   std::vector<at::Tensor> outputs, std::shared_ptr<FutureCompleter> completer)
    : c10d::Work(rank, type, profilingTitle),
      outputs_(std::move(outputs)),
      completer_(std::move(completer)) {}

WorkBase::~WorkBase() = default;

bool WorkBase::isCompleted() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

bool WorkBase::isSuccess() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ && !error_;
}

std::exception_ptr WorkBase::exception() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void WorkBase::whenDone(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) {
      listeners_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

void WorkBase::complete(std::exception_ptr error) {
  std::vector<std::function<void()>> listeners;
  bool post;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    error_ = error;
    listeners.swap(listeners_);
    post = futureWanted_ && !futureDone_;
    if (post) futureDone_ = true;
  }
  finish(error);  // the base class's record (profiler range end); nothing here reads it
  doneCv_.notify_all();
  for (auto& fn : listeners) fn();
  if (post) {
    // Keep this Work (and its completer) alive until the future is completed.
    auto self = c10::intrusive_ptr<WorkBase>::reclaim_copy(this);
    completer_->post([self] { self->completeFuture(); });
  }
}

void WorkBase::waitCompleted() {
  std::unique_lock<std::mutex> lock(mu_);
  doneCv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

void WorkBase::completeFuture() {
  std::exception_ptr error;
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(mu_);
    error = error_;
    future = future_;
  }
  if (error) {
    future->setError(error);
  } else {
    future->markCompleted(c10::IValue(outputs_));
  }
}

c10::intrusive_ptr<c10::ivalue::Future> WorkBase::getFuture() {
  bool completeNow;
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!future_) future_ = newTensorListFuture();
    future = future_;
    futureWanted_ = true;
    completeNow = done_ && !futureDone_;
    if (completeNow) futureDone_ = true;
  }
  // Finished already: nothing is attached to the future yet, so completing it here runs no
  // callback on this thread.
  if (completeNow) completeFuture();
  return future;
}

// ---- WorkChorus ----

WorkChorus::WorkChorus(int rank, c10d::OpType type, const char* profilingTitle,
                       std::vector<at::Tensor> outputs, std::vector<at::Tensor> keepAlive,
                       std::function<void()> copyOut, std::shared_ptr<FutureCompleter> completer)
    : WorkBase(rank, type, profilingTitle, std::move(outputs), std::move(completer)),
      keepAlive_(std::move(keepAlive)),
      copyOut_(std::move(copyOut)) {}

WorkChorus::~WorkChorus() = default;

void WorkChorus::attach(const c10::intrusive_ptr<WorkChorus>& self,
                        std::vector<chorus::Work> parts) {
  TORCH_INTERNAL_ASSERT(!parts.empty(), "chorus backend: a Work without an operation");
  {
    std::lock_guard<std::mutex> lock(self->partsMu_);
    self->partsLeft_ = parts.size();
  }
  self->parts_ = parts;
  // Each callback holds a reference: the Work (and the tensors it keeps alive) lives until the
  // operations have finished, even if the caller drops it at once.
  for (const auto& part : parts) {
    part.onComplete([keep = self](std::exception_ptr error) { keep->partDone(std::move(error)); });
  }
}

void WorkChorus::fail(std::exception_ptr error) {
  keepAlive_.clear();
  extra_.reset();
  copyOut_ = nullptr;
  complete(forTorch(std::move(error)));
}

void WorkChorus::partDone(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(partsMu_);
    if (error && !firstError_) firstError_ = forTorch(std::move(error));
    if (--partsLeft_ != 0) return;
    error = firstError_;
  }
  if (!error && copyOut_) {
    try {
      copyOut_();
    } catch (...) {
      error = std::current_exception();
    }
  }
  keepAlive_.clear();  // staging memory goes back now, not when the caller drops the Work
  extra_.reset();
  copyOut_ = nullptr;
  complete(error);
}

bool WorkChorus::wait(std::chrono::milliseconds timeout) {
  // The Chorus wait runs an operation on this thread when the communicator is idle; a failure
  // is rethrown below from this Work's own record (which includes copy-out failures).
  const auto start = Clock::now();
  for (const auto& part : parts_) {
    try {
      if (!waitPart(part, remainingOf(timeout, start), onSignal_)) {
        TORCH_CHECK(false, "chorus backend: ", c10d::opTypeToString(retrieveOpType()),
                    " did not complete within ", timeout.count(), " ms");
      }
    } catch (const c10::Error&) {
      throw;
    } catch (const pybind11::error_already_set&) {
      throw;  // a signal handler's exception (KeyboardInterrupt)
    } catch (...) {
      break;  // reported below, once every part has ended
    }
  }
  try {
    waitCompleted();  // the callbacks ran before the Chorus waits returned
  } catch (...) {
    python_signals::raiseIfSignalled();  // aborted by Ctrl-C: KeyboardInterrupt, not the abort
    throw;
  }
  return true;
}

// ---- WorkBatch ----

WorkBatch::WorkBatch(int rank, std::vector<c10::intrusive_ptr<WorkChorus>> works,
                     std::shared_ptr<FutureCompleter> completer)
    : WorkBase(rank, kBatchOp, "chorus:coalesced", {}, std::move(completer)),
      works_(std::move(works)) {
  for (const auto& w : works_) {
    for (auto& t : w->result()) outputs_.push_back(t);
  }
}

WorkBatch::~WorkBatch() = default;

void WorkBatch::start(const c10::intrusive_ptr<WorkBatch>& self) {
  if (self->works_.empty()) {
    self->complete(nullptr);
    return;
  }
  auto left = std::make_shared<std::atomic<size_t>>(self->works_.size());
  for (const auto& w : self->works_) {
    w->whenDone([self, left] {
      if (left->fetch_sub(1) != 1) return;
      std::exception_ptr error;
      for (const auto& x : self->works_) {
        error = x->exception();
        if (error) break;
      }
      self->complete(error);
    });
  }
}

bool WorkBatch::wait(std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  for (const auto& w : works_) {
    try {
      w->wait(remainingOf(timeout, start));
    } catch (const c10::Error&) {
      if (!w->isCompleted()) throw;  // this wait ran out of time
      break;                         // the part failed: reported below
    } catch (const pybind11::error_already_set&) {
      throw;  // a signal handler's exception (KeyboardInterrupt)
    } catch (...) {
      break;
    }
  }
  waitCompleted();
  return true;
}

}  // namespace chorus::torch_backend
