// Shared completion state behind a Work handle.
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>

namespace chorus::detail {

struct WorkState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;

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
