// In-process store: a map under a mutex; waits use a condition variable and a deadline.
#include <chorus/store.hpp>

#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "common/deadline.h"
#include "store/store_util.h"

namespace chorus {
namespace {

class HashStore final : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      data_[key] = value;
    }
    cv_.notify_all();
  }

  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    Deadline deadline = Deadline::after(timeout);
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_until(lock, deadline.at(), [&] { return data_.count(key) != 0; })) {
      store::throwWaitTimeout("hash store", "key " + store::quoteKey(key), timeout);
    }
    return data_.at(key);
  }

  int64_t add(const std::string& key, int64_t delta) override {
    int64_t result = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = data_.find(key);
      int64_t current = it == data_.end() ? 0 : store::parseCounter(key, it->second);
      result = store::addCounter(key, current, delta);
      data_[key] = store::formatCounter(result);
    }
    cv_.notify_all();
    return result;
  }

  bool check(const std::vector<std::string>& keys) override {
    std::lock_guard<std::mutex> lock(mu_);
    return allPresent(keys);
  }

  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    Deadline deadline = Deadline::after(timeout);
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_until(lock, deadline.at(), [&] { return allPresent(keys); })) {
      store::throwWaitTimeout("hash store", firstMissing(keys), timeout);
    }
  }

 private:
  bool allPresent(const std::vector<std::string>& keys) const {
    for (const auto& k : keys) {
      if (data_.find(k) == data_.end()) return false;
    }
    return true;
  }

  std::string firstMissing(const std::vector<std::string>& keys) const {
    for (const auto& k : keys) {
      if (data_.find(k) == data_.end()) return "key " + store::quoteKey(k);
    }
    return "keys";
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, Bytes> data_;
};

}  // namespace

std::shared_ptr<Store> makeHashStore() { return std::make_shared<HashStore>(); }

}  // namespace chorus
