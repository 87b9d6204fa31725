#include "work_chorus.h"

#include <c10/util/Exception.h>

#include <string>

namespace chorus::torch_backend {

WorkChorus::WorkChorus(int rank, c10d::OpType type, const char* profilingTitle,
                       std::vector<at::Tensor> outputs, std::vector<at::Tensor> keepAlive,
                       std::function<void()> copyOut, std::shared_ptr<FutureCompleter> completer)
    : c10d::Work(rank, type, profilingTitle),
      outputs_(std::move(outputs)),
      keepAlive_(std::move(keepAlive)),
      copyOut_(std::move(copyOut)),
      completer_(std::move(completer)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

WorkChorus::~WorkChorus() = default;

void WorkChorus::attach(const c10::intrusive_ptr<WorkChorus>& self, chorus::Work work) {
  self->work_ = work;
  // The callback holds a reference: the Work (and the tensors it keeps alive) lives until the
  // operation has finished, even if the caller drops it at once.
  work.onComplete([keep = self](std::exception_ptr error) { keep->complete(std::move(error)); });
}

void WorkChorus::complete(std::exception_ptr error) {
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
  finish(error);
  bool post;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    post = futureWanted_ && !futureDone_;
    if (post) futureDone_ = true;
  }
  if (post) {
    // Keep this Work (and its completer) alive until the future is completed.
    auto self = c10::intrusive_ptr<WorkChorus>::reclaim_copy(this);
    completer_->post([self] { self->completeFuture(); });
  }
}

void WorkChorus::completeFuture() {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error = exception_;
  }
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

c10::intrusive_ptr<c10::ivalue::Future> WorkChorus::getFuture() {
  bool completeNow;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    futureWanted_ = true;
    completeNow = completed_ && !futureDone_;
    if (completeNow) futureDone_ = true;
  }
  // Finished already: nothing is attached to the future yet, so completing it here runs no
  // callback on this thread.
  if (completeNow) completeFuture();
  return future_;
}

bool WorkChorus::wait(std::chrono::milliseconds timeout) {
  // The Chorus wait runs the operation on this thread when the communicator is idle; its
  // failure is rethrown below from this Work's own record (which includes copy-out failures).
  try {
    if (timeout == kNoTimeout) {
      work_.wait();
    } else if (!work_.wait(timeout)) {
      TORCH_CHECK(false, "chorus backend: ", c10d::opTypeToString(retrieveOpType()),
                  " did not complete within ", timeout.count(), " ms");
    }
  } catch (const c10::Error&) {
    throw;
  } catch (...) {
    // Reported below.
  }
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return completed_; });  // callbacks ran before the Chorus wait returned
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

}  // namespace chorus::torch_backend
