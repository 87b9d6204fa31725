// Wraps another store and prefixes every key with prefix + "/".
#include "store/compare_set.h"

#include <chorus/error.hpp>
#include <chorus/store.hpp>

namespace chorus {
namespace {

class PrefixStore final : public Store, public store::ComparesAndSets {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
      : prefix_(std::move(prefix) + "/"), inner_(std::move(inner)) {}

  void set(const std::string& key, const Bytes& value) override { inner_->set(full(key), value); }
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    return inner_->get(full(key), timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    return inner_->add(full(key), delta);
  }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(full(keys)); }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    inner_->wait(full(keys), timeout);
  }
  std::vector<Bytes> getMany(const std::vector<std::string>& keys,
                             std::chrono::milliseconds timeout) override {
    return inner_->getMany(full(keys), timeout);
  }

  bool offersCompareSet() const override { return store::compareSetOf(*inner_) != nullptr; }
  store::CompareSetResult compareSet(const std::string& key, const std::optional<Bytes>& expected,
                                     const Bytes& desired) override {
    auto* cas = store::compareSetOf(*inner_);
    if (cas == nullptr) {
      throw Error(ErrorCode::kInternal, "prefix store: compare-and-set on a store that has none");
    }
    return cas->compareSet(full(key), expected, desired);
  }

 private:
  std::string full(const std::string& key) const { return prefix_ + key; }
  std::vector<std::string> full(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(full(k));
    return out;
  }

  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

}  // namespace

std::shared_ptr<Store> makePrefixStore(const std::string& prefix, std::shared_ptr<Store> inner) {
  if (!inner) throw Error(ErrorCode::kInvalidArgument, "makePrefixStore: inner store is null");
  return std::make_shared<PrefixStore>(prefix, std::move(inner));
}

}  // namespace chorus
