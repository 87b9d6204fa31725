#include "core/joiner_liveness.h"

#include "core/elastic_keys.h"

#include <chorus/error.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace chorus::membership {
namespace {

using std::chrono::milliseconds;

std::string seenKey(int64_t ticket) {
  return elastic_keys::kRoot + std::string("joiner_seen/") + std::to_string(ticket);
}

long long wallMicrosNow() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr milliseconds kSlice{250};

// Waits cut into slices (see watchingMembers).
class WatchingStore final : public Store {
 public:
  WatchingStore(std::shared_ptr<Store> inner, std::function<std::string()> deadMember)
      : inner_(std::move(inner)), deadMember_(std::move(deadMember)) {}

  void set(const std::string& key, const Bytes& value) override { inner_->set(key, value); }
  int64_t add(const std::string& key, int64_t delta) override { return inner_->add(key, delta); }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(keys); }
  Bytes get(const std::string& key, milliseconds timeout) override {
    return sliced(timeout, [&](milliseconds t) { return inner_->get(key, t); });
  }
  void wait(const std::vector<std::string>& keys, milliseconds timeout) override {
    sliced(timeout, [&](milliseconds t) {
      inner_->wait(keys, t);
      return 0;
    });
  }
  std::vector<Bytes> getMany(const std::vector<std::string>& keys, milliseconds timeout) override {
    return sliced(timeout, [&](milliseconds t) { return inner_->getMany(keys, t); });
  }

 private:
  template <class F>
  auto sliced(milliseconds timeout, F&& attempt) -> decltype(attempt(timeout)) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::ceil<milliseconds>(until - std::chrono::steady_clock::now());
      try {
        return attempt(std::clamp(left, milliseconds(1), kSlice));
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kTimeout || left <= kSlice) throw;
      }
      const std::string dead = deadMember_();
      if (!dead.empty()) {
        throw Error(ErrorCode::kPeerFailure,
                    dead + " is gone (its heartbeat stopped) while the members connected");
      }
    }
  }

  std::shared_ptr<Store> inner_;
  std::function<std::string()> deadMember_;
};

}  // namespace

JoinerBeat::JoinerBeat(std::shared_ptr<Store> root, int64_t ticket, double heartbeatSeconds)
    : root_(std::move(root)), ticket_(ticket), periodSeconds_(std::min(1.0, heartbeatSeconds / 4)) {
  if (heartbeatSeconds <= 0 || !root_) return;
  stamp();
  thread_ = std::thread([this] { run(); });
}

JoinerBeat::~JoinerBeat() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void JoinerBeat::stamp() {
  const std::string now = std::to_string(wallMicrosNow());
  try {
    root_->set(seenKey(ticket_), Store::Bytes(now.begin(), now.end()));
  } catch (const Error&) {
    // The store is slow or gone: the next period tries again (and the join's own waits report a
    // store that stays gone).
  }
}

void JoinerBeat::run() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto period = std::chrono::duration<double>(periodSeconds_);
  while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
    lock.unlock();
    stamp();
    lock.lock();
  }
}

bool joinerAlive(Store& root, int64_t ticket, double heartbeatSeconds) {
  if (heartbeatSeconds <= 0) return true;
  try {
    if (!root.check({seenKey(ticket)})) return true;
    const Store::Bytes v = root.get(seenKey(ticket), milliseconds(200));
    const long long seen = std::strtoll(std::string(v.begin(), v.end()).c_str(), nullptr, 10);
    return seen <= 0 || wallMicrosNow() - seen <= static_cast<long long>(heartbeatSeconds * 1e6);
  } catch (const Error&) {
    return true;
  }
}

std::shared_ptr<Store> watchingMembers(std::shared_ptr<Store> inner,
                                       std::function<std::string()> deadMember) {
  return std::make_shared<WatchingStore>(std::move(inner), std::move(deadMember));
}

}  // namespace chorus::membership
