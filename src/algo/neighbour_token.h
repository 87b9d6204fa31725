// An empty message from every rank to the next one, for collectives whose messages follow a tree
// or star that depends on the root: ranks that disagree on the root (or on the count) might
// otherwise exchange nothing with each other and return without noticing. The link r -> r + 1
// does not depend on the call, so every rank compares its call with a neighbour's (frames carry
// the call's description) before it returns.
#pragma once

#include "algo/group.h"
#include "algo/ring_pattern.h"

#include <cstdint>

namespace chorus::algo {

class NeighbourToken {
 public:
  // A step no algorithm that uses the token sends data at.
  static constexpr uint32_t kStep = ~uint32_t{0};

  void start(const Group& g) {
    g.tx->postRecv(recv_, ringMod(g.rank - 1, g.size), nullptr, 0, kStep);
    g.tx->postSend(send_, ringMod(g.rank + 1, g.size), nullptr, 0, kStep);
  }
  void finish(const Group& g) {
    g.wait(recv_);
    g.wait(send_);
  }

 private:
  transport::Request send_, recv_;
};

}  // namespace chorus::algo
