// Store::getMany's default: one get per key under one deadline, as one request would have.
#include "common/deadline.h"

#include <chorus/store.hpp>

namespace chorus {

std::vector<Store::Bytes> Store::getMany(const std::vector<std::string>& keys,
                                         std::chrono::milliseconds timeout) {
  const Deadline deadline = Deadline::after(timeout);
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (const auto& k : keys)
    values.push_back(get(k, std::chrono::milliseconds(deadline.remainingMs())));
  return values;
}

}  // namespace chorus
