#include "store_bridge.h"

#include <chorus/error.hpp>

#include <mutex>
#include <string>
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
    std::lock_guard<std::mutex> lock(mu_);
    try {
      inner_->wait({key}, timeout);
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
    std::lock_guard<std::mutex> lock(mu_);
    try {
      inner_->wait(keys, timeout);
    } catch (const std::exception& e) {
      rethrowAsChorus(e, "wait");
    }
  }

 private:
  // A c10d TCPStore client is one socket: calls from two threads must not interleave.
  std::mutex mu_;
  c10::intrusive_ptr<c10d::Store> inner_;
};

}  // namespace

std::shared_ptr<Store> bridgeStore(c10::intrusive_ptr<c10d::Store> store) {
  return std::make_shared<C10dStore>(std::move(store));
}

}  // namespace chorus::torch_backend
