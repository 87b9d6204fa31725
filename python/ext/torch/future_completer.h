// Completes torch futures off the communicator's worker thread. A future's callbacks run on the
// thread that completes it, and torch's own comm hooks (PowerSGD) issue a collective inside such
// a callback and wait for it there: run on the worker, that wait would block the very thread that
// has to run the collective. Completions therefore go to a small pool that grows by one thread
// whenever every thread of it is busy (blocked in a callback), so a completion never waits for
// a callback that waits for it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace chorus::torch_backend {

class FutureCompleter {
 public:
  FutureCompleter() = default;
  // Runs what is queued, then joins.
  ~FutureCompleter();
  FutureCompleter(const FutureCompleter&) = delete;
  FutureCompleter& operator=(const FutureCompleter&) = delete;

  void post(std::function<void()> fn);

 private:
  // Shared with the threads: one of them may outlive this object (see the destructor).
  struct Pool {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> queue;
    int idle = 0;
    bool stop = false;
  };
  static void loop(const std::shared_ptr<Pool>& pool);

  std::shared_ptr<Pool> pool_ = std::make_shared<Pool>();
  std::vector<std::thread> threads_;  // guarded by pool_->mu
};

}  // namespace chorus::torch_backend
