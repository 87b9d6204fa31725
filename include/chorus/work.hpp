// Completion handle of one collective.
#pragma once

#include <chorus/export.h>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>

namespace chorus {

namespace detail {
struct WorkState;
}

// Returned by every collective. Operations of one communicator complete in issue order. The
// buffers passed to a collective must stay alive and untouched until it completes.
class CHORUS_API Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

  // Blocks until the operation completes; throws chorus::Error if it failed. When the operation
  // is the next one due and nothing else is running on its communicator, it runs right here on
  // the calling thread.
  void wait() const;
  // Waits at most timeout. Returns false if the operation is still running; throws if it failed.
  bool wait(std::chrono::milliseconds timeout) const;
  // True once the operation finished, successfully or not. Never blocks.
  bool isCompleted() const;
  // The failure, or nullptr while running or after success.
  std::exception_ptr exception() const;
  // Calls fn once the operation has finished, with its failure or nullptr: on the thread that
  // finished it (the communicator's worker, or a thread that ran it inline in wait()) before any
  // wait() returns, or right here when it has finished already. For bindings that copy results
  // out of a staging buffer or complete a future. fn must not throw, and must not wait for work
  // of this communicator (issuing new work is fine).
  void onComplete(std::function<void(std::exception_ptr)> fn) const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace chorus
