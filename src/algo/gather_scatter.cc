// Gather to and scatter from a root, directly: the root posts one receive (gather) or one send
// (scatter) per rank at once, straight from or into the user's buffer, and the transport moves
// them as peers get there. One hop for every block, no copies but the root's own block; the
// root's link carries N - 1 blocks, which no tree avoids. The neighbour token makes ranks that
// disagree on the root notice it.
#include "algo/collectives.h"
#include "algo/copy.h"
#include "algo/neighbour_token.h"

namespace chorus::algo {

void directGather(const Group& g, const void* in, void* out, size_t bytes, DataType dtype,
                  int root) {
  NeighbourToken token;
  token.start(g);
  if (g.rank == root) {
    auto* dst = static_cast<uint8_t*>(out);
    auto& recvs = g.scratch->recvs(static_cast<size_t>(g.size));
    for (int q = 0; q < g.size; ++q) {
      if (q != root) {
        g.tx->postRecv(recvs[static_cast<size_t>(q)], q, dst + bytes * static_cast<size_t>(q),
                       bytes, 0);
      }
    }
    uint8_t* own = dst + bytes * static_cast<size_t>(root);
    if (own != in) copyBytes(dtype, own, in, bytes);  // else in place
    for (auto& r : recvs) g.wait(r);
  } else {
    transport::Request send;
    g.tx->postSend(send, root, in, bytes, 0);
    g.wait(send);
  }
  token.finish(g);
}

void directScatter(const Group& g, const void* in, void* out, size_t bytes, DataType dtype,
                   int root) {
  NeighbourToken token;
  token.start(g);
  if (g.rank == root) {
    const auto* src = static_cast<const uint8_t*>(in);
    auto& sends = g.scratch->sends(static_cast<size_t>(g.size));
    for (int q = 0; q < g.size; ++q) {
      if (q != root) {
        g.tx->postSend(sends[static_cast<size_t>(q)], q, src + bytes * static_cast<size_t>(q),
                       bytes, 0);
      }
    }
    const uint8_t* own = src + bytes * static_cast<size_t>(root);
    if (own != out) copyBytes(dtype, out, own, bytes);  // else in place
    for (auto& s : sends) g.wait(s);
  } else {
    transport::Request recv;
    g.tx->postRecv(recv, root, out, bytes, 0);
    g.wait(recv);
  }
  token.finish(g);
}

}  // namespace chorus::algo
