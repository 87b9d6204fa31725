#include "store/get_many.h"

#include "common/deadline.h"
#include "store/store_util.h"

namespace chorus::store {

std::vector<Store::Bytes> getMany(Store& store, const std::vector<std::string>& keys,
                                  std::chrono::milliseconds timeout) {
  if (auto* many = dynamic_cast<ReadsMany*>(&store)) return many->getMany(keys, timeout);
  // One deadline for all the gets, as one request would have.
  const Deadline deadline = Deadline::after(timeout);
  std::vector<Store::Bytes> values;
  values.reserve(keys.size());
  for (const auto& k : keys) {
    values.push_back(store.get(k, std::chrono::milliseconds(deadline.remainingMs())));
  }
  return values;
}

}  // namespace chorus::store
