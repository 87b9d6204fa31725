#include <chorus/error.hpp>
#include <chorus/work.hpp>

#include "core/communicator_impl.h"
#include "core/work_state.h"

namespace chorus {

void Work::wait() const {
  if (!state_) throw Error(ErrorCode::kInvalidArgument, "wait() on an empty Work");
  if (auto owner = state_->owner.lock()) owner->runIfNext(*state_);
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

bool Work::wait(std::chrono::milliseconds timeout) const {
  if (!state_) throw Error(ErrorCode::kInvalidArgument, "wait() on an empty Work");
  std::unique_lock<std::mutex> lock(state_->mu);
  if (!state_->cv.wait_for(lock, timeout, [&] { return state_->done; })) return false;
  if (state_->error) std::rethrow_exception(state_->error);
  return true;
}

bool Work::isCompleted() const {
  if (!state_) return false;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

std::exception_ptr Work::exception() const {
  if (!state_) return nullptr;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->error;
}

void Work::onComplete(std::function<void(std::exception_ptr)> fn) const {
  if (!state_) throw Error(ErrorCode::kInvalidArgument, "onComplete() on an empty Work");
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->finishing) {
      state_->callbacks.push_back(std::move(fn));
      return;
    }
    error = state_->error;
  }
  fn(error);
}

}  // namespace chorus
