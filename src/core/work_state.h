// Shared completion state behind a Work handle.
#pragma once

#include <chorus/communicator.hpp>

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>

namespace chorus::detail {

struct WorkState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  // The communicator whose queue holds this work, for a waiter that runs it inline; expired once
  // the communicator is gone (its work is finished by then).
  std::weak_ptr<Communicator::Impl> owner;

  void finish(std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      error = std::move(e);
      done = true;
    }
    cv.notify_all();
  }
};

}  // namespace chorus::detail
