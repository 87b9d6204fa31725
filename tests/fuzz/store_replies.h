// What the store server harnesses require of its replies: every reply is a whole frame, a
// plausible header and its body.
#pragma once

#include "fuzz_check.h"
#include "store/tcp_store_protocol.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus::fuzz {

inline void checkStoreReplies(const std::vector<uint8_t>& bytes) {
  namespace proto = chorus::store::proto;
  size_t pos = 0;
  while (pos + proto::kHeaderSize <= bytes.size()) {
    proto::Header h = proto::parseHeader(bytes.data() + pos);
    if (!proto::plausible(h)) finding("the store server sent a malformed reply header");
    pos += proto::kHeaderSize + h.body_len;
  }
  if (pos != bytes.size()) finding("the store server sent a partial reply");
}

}  // namespace chorus::fuzz
