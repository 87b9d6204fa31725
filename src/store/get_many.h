// Reading many keys at once: the rendezvous of N ranks reads N records per rank, and a store
// served by one thread answers them faster in one request than in N round trips.
#pragma once

#include <chorus/store.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace chorus::store {

// Implemented by stores that read many keys in one request (the TCP store client, and a prefix
// store over one).
class ReadsMany {
 public:
  virtual ~ReadsMany() = default;
  // As Store::get of every key, in order, waiting until all exist.
  virtual std::vector<Store::Bytes> getMany(const std::vector<std::string>& keys,
                                            std::chrono::milliseconds timeout) = 0;
};

// The values of `keys`, in order, once every one exists: one request where the store reads many
// keys at once, otherwise one get per key (all within `timeout`). Throws as Store::get, the
// timeout naming a missing key.
std::vector<Store::Bytes> getMany(Store& store, const std::vector<std::string>& keys,
                                  std::chrono::milliseconds timeout);

}  // namespace chorus::store
