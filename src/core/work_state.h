// Shared completion state behind a Work handle.
#pragma once

#include "core/communicator_access.h"

#include <chorus/communicator.hpp>

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace chorus::detail {

struct WorkState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  // The communicator whose queue holds this work, for a waiter that runs it inline; expired once
  // the communicator is gone (its work is finished by then).
  std::weak_ptr<CommunicatorImpl> owner;
  // Set once the outcome is known, before the callbacks run; `done` follows after them.
  bool finishing = false;
  std::vector<std::function<void(std::exception_ptr)>> callbacks;
  // Registered buffers the call uses (core/registered_memory.h): freeing them fails until the
  // call has finished.
  std::shared_ptr<void> pin;

  // Runs the callbacks first, so that a waiter who returns from wait() also sees their effects
  // (a binding's copy from a staging buffer into the caller's memory, for instance).
  void finish(std::exception_ptr e) {
    std::vector<std::function<void(std::exception_ptr)>> run;
    pin.reset();  // the call is done with its buffers
    {
      std::lock_guard<std::mutex> lock(mu);
      error = std::move(e);
      finishing = true;
      run.swap(callbacks);
    }
    for (auto& fn : run) fn(error);
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
    }
    cv.notify_all();
  }

  // A work finished before it was queued (the communicator was aborted already).
  void finishedEarly(std::exception_ptr e) {
    pin.reset();
    error = std::move(e);
    finishing = true;
    done = true;
  }
};

}  // namespace chorus::detail
