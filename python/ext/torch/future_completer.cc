#include "future_completer.h"

namespace chorus::torch_backend {

FutureCompleter::~FutureCompleter() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(pool_->mu);
    pool_->stop = true;
    threads.swap(threads_);
  }
  pool_->cv.notify_all();
  for (auto& t : threads) {
    // The last reference may go away inside a callback on one of these threads: that one
    // finishes on its own, holding the pool.
    if (t.get_id() == std::this_thread::get_id()) {
      t.detach();
    } else {
      t.join();
    }
  }
}

void FutureCompleter::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(pool_->mu);
    pool_->queue.push_back(std::move(fn));
    if (pool_->idle < static_cast<int>(pool_->queue.size())) {
      ++pool_->idle;  // idle from the start, so that two posts in a row start one thread
      threads_.emplace_back([pool = pool_] { loop(pool); });
    }
  }
  pool_->cv.notify_one();
}

void FutureCompleter::loop(const std::shared_ptr<Pool>& pool) {
  std::unique_lock<std::mutex> lock(pool->mu);
  for (;;) {
    pool->cv.wait(lock, [&] { return pool->stop || !pool->queue.empty(); });
    if (pool->queue.empty()) return;  // stopping, nothing left
    auto fn = std::move(pool->queue.front());
    pool->queue.pop_front();
    --pool->idle;
    lock.unlock();
    fn();
    lock.lock();
    ++pool->idle;
  }
}

}  // namespace chorus::torch_backend
