// Compare-and-set, offered by the stores that can do it atomically (the in-process store and
// etcd, through a transaction). A capability beside Store rather than a virtual of it: a store
// that cannot do it atomically must not pretend to, and a caller that finds none keeps the
// counter-based election it had before (the TCP and file stores).
#pragma once

#include <chorus/store.hpp>

#include <optional>
#include <string>

namespace chorus::store {

struct CompareSetResult {
  bool swapped = false;                 // the key held `expected` and now holds `desired`
  std::optional<Store::Bytes> current;  // the key's value after the call, nullopt: absent
};

class ComparesAndSets {
 public:
  virtual ~ComparesAndSets() = default;
  // False when a wrapper's inner store has none (the prefix store over a TCP store).
  virtual bool offersCompareSet() const { return true; }
  // Sets key to desired when it holds expected (nullopt: when it is absent), atomically with
  // respect to every other writer of the store. When it does not, leaves it unchanged and
  // returns what it holds.
  virtual CompareSetResult compareSet(const std::string& key,
                                      const std::optional<Store::Bytes>& expected,
                                      const Store::Bytes& desired) = 0;
};

// The store's compare-and-set, or nullptr when it has none.
ComparesAndSets* compareSetOf(Store& store);

}  // namespace chorus::store
