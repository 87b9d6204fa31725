// In-process store: a map under a mutex; waits use a condition variable and a deadline.
#include <chorus/store.hpp>

#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "common/deadline.h"
#include "store/compare_set.h"
#include "store/store_util.h"

namespace chorus {
namespace {

class HashStore final : public Store, public store::ComparesAndSets {
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

  store::CompareSetResult compareSet(const std::string& key, const std::optional<Bytes>& expected,
                                     const Bytes& desired) override {
    store::CompareSetResult result;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = data_.find(key);
      const bool matches =
          expected ? it != data_.end() && it->second == *expected : it == data_.end();
      if (!matches) {
        return {false, it == data_.end() ? std::nullopt : std::optional<Bytes>(it->second)};
      }
      data_[key] = desired;
      result = {true, desired};
    }
    cv_.notify_all();
    return result;
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
