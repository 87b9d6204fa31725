// The id every rank of one communicator agrees on at rendezvous: connections and shared-memory
// segments of another job are refused by it.
#pragma once

#include <array>
#include <cstdint>

namespace chorus::transport {

using JobId = std::array<uint8_t, 16>;

}  // namespace chorus::transport
