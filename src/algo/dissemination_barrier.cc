// Barrier in ceil(log2 n) rounds: in round k every rank signals rank+2^k and waits for rank-2^k.
#include "algo/collectives.h"
#include "algo/ring_pattern.h"

namespace chorus::algo {

void disseminationBarrier(const Group& g) {
  uint32_t round = 0;
  for (int dist = 1; dist < g.size; dist <<= 1, ++round) {
    transport::Request send, recv;
    g.tx->postRecv(recv, ringMod(g.rank - dist, g.size), nullptr, 0, round);
    g.tx->postSend(send, ringMod(g.rank + dist, g.size), nullptr, 0, round);
    g.wait(recv);
    g.wait(send);
  }
}

}  // namespace chorus::algo
