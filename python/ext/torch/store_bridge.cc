#include "store_bridge.h"

#include <chorus/error.hpp>

#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace chorus::torch_backend {
namespace {

// c10d stores report a wait that ran out as a c10::Error (or std::runtime_error) whose text says
// "timeout"; anything else is a store failure.
[[noreturn]] void rethrowAsChorus(const std::exception& e, const std::string& what) {
  const std::string text = e.what();
  const bool timedOut =
      text.find("imeout") != std::string::npos || text.find("imed out") != std::string::npos;
  throw Error(timedOut ? ErrorCode::kTimeout : ErrorCode::kSystem,
              "torch store: " + what + ": " + text.substr(0, text.find('\n')));
}

class C10dStore final : public Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> inner) : inner_(std::move(inner)) {}

  void set(const std::string& key, const Bytes& value) override {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      inner_->set(key, value);
    } catch (const std::exception& e) {
      rethrowAsChorus(e, "set " + key);
    }
  }

  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    waitFor({key}, timeout, "get " + key);
    std::lock_guard<std::mutex> lock(mu_);
    try {
      return inner_->get(key);
    } catch (const std::exception& e) {
      rethrowAsChorus(e, "get " + key);
    }
  }

  int64_t add(const std::string& key, int64_t delta) override {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      return inner_->add(key, delta);
    } catch (const std::exception& e) {
      rethrowAsChorus(e, "add " + key);
    }
  }

  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      return inner_->check(keys);
    } catch (const std::exception& e) {
      rethrowAsChorus(e, "check");
    }
  }

  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    waitFor(keys, timeout, "wait");
  }

  // The rendezvous reads every peer's record: one request where torch's store has multiGet
  // (torch 2.x; its TCPStore answers it in one round trip), one get per key on 1.13.
  std::vector<Bytes> getMany(const std::vector<std::string>& keys,
                             std::chrono::milliseconds timeout) override {
    const std::string what = "get " + std::to_string(keys.size()) + " keys";
    waitFor(keys, timeout, what);
    std::lock_guard<std::mutex> lock(mu_);
    try {
#if TORCH_VERSION_MAJOR >= 2
      return inner_->multiGet(keys);
#else
      std::vector<Bytes> values;
      for (const auto& k : keys) values.push_back(inner_->get(k));
      return values;
#endif
    } catch (const std::exception& e) {
      rethrowAsChorus(e, what);
    }
  }

 private:
  // torch 1.13's TCPStore client cannot take back a wait that timed out: the server still answers
  // it when the key appears, and that late answer is read as the reply to the next request, which
  // leaves the connection out of step for good. So never hand the store a wait that may run out;
  // poll with check(), which returns at once, until the keys are there or the deadline passes.
  void waitFor(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
               const std::string& what) {
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout;
    auto pause = std::chrono::microseconds(200);
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        try {
          if (inner_->check(keys)) return;
        } catch (const std::exception& e) {
          rethrowAsChorus(e, what);
        }
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        throw Error(ErrorCode::kTimeout, "torch store: " + what + ": timed out after " +
                                             std::to_string(timeout.count()) + " ms");
      }
      // Unlocked while asleep, so other threads of this process can use the store meanwhile.
      std::this_thread::sleep_for(
          std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
      pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
  }

  // A c10d TCPStore client is one socket: calls from two threads must not interleave.
  std::mutex mu_;
  c10::intrusive_ptr<c10d::Store> inner_;
};

}  // namespace

std::shared_ptr<Store> bridgeStore(c10::intrusive_ptr<c10d::Store> store) {
  return std::make_shared<C10dStore>(std::move(store));
}

}  // namespace chorus::torch_backend
