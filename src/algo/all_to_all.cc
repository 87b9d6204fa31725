// All-to-all and all-to-all-v: every rank sends a block to every other rank. Rank r posts its
// receives and then its sends in shifted order (to r + s, from r - s, s = 1..N-1), so at each
// moment the ranks' traffic forms a permutation instead of everyone sending to rank 0 first; all
// messages are posted at once and the transport moves them as peers get there. Received blocks
// land straight in the output. Empty blocks still travel as empty messages, so both ends of
// every pair check each other's call and sizes.
#include "algo/collectives.h"
#include "algo/copy.h"
#include "algo/ring_pattern.h"
#include "reduce/internal_types.h"

namespace chorus::algo {
namespace {

// sendAt(q) / recvAt(q): where the block for / from rank q is and how many bytes it has.
template <class SendAt, class RecvAt>
void exchange(const Group& g, DataType dtype, SendAt sendAt, RecvAt recvAt) {
  const int n = g.size, r = g.rank;
  const size_t others = static_cast<size_t>(n - 1);
  auto& recvs = g.scratch->recvs(others);
  auto& sends = g.scratch->sends(others);
  for (int s = 1; s < n; ++s) {
    const int from = ringMod(r - s, n);
    auto [p, bytes] = recvAt(from);
    g.tx->postRecv(recvs[static_cast<size_t>(s - 1)], from, p, bytes, 0);
  }
  for (int s = 1; s < n; ++s) {
    const int to = ringMod(r + s, n);
    auto [p, bytes] = sendAt(to);
    g.tx->postSend(sends[static_cast<size_t>(s - 1)], to, p, bytes, 0);
  }
  auto [mineIn, mineBytes] = sendAt(r);
  auto [mineOut, mineOutBytes] = recvAt(r);
  (void)mineOutBytes;
  if (mineOut != mineIn && mineBytes > 0) copyBytes(dtype, mineOut, mineIn, mineBytes);
  for (auto& q : recvs) g.wait(q);
  for (auto& q : sends) g.wait(q);
}

}  // namespace

void pairwiseAllToAll(const Group& g, const void* in, void* out, size_t blockBytes,
                      DataType dtype) {
  const size_t total = blockBytes * static_cast<size_t>(g.size);
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  if (src == dst) {
    // In place: received blocks would overwrite blocks still to be sent.
    uint8_t* copy = g.scratch->second(total);
    copyBytes(dtype, copy, src, total);
    src = copy;
  }
  exchange(
      g, dtype,
      [&](int q) {
        return std::pair<const uint8_t*, size_t>(src + blockBytes * static_cast<size_t>(q),
                                                 blockBytes);
      },
      [&](int q) {
        return std::pair<uint8_t*, size_t>(dst + blockBytes * static_cast<size_t>(q), blockBytes);
      });
}

void pairwiseAllToAllV(const Group& g, const void* in, const size_t* sendCounts, void* out,
                       const size_t* recvCounts, DataType dtype) {
  const size_t es = reduce::elementSize(dtype);
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  // Offsets in elements: prefix sums, recomputed per block (N is small next to the data).
  auto offset = [](const size_t* counts, int q) {
    size_t at = 0;
    for (int k = 0; k < q; ++k) at += counts[k];
    return at;
  };
  exchange(
      g, dtype,
      [&](int q) {
        return std::pair<const uint8_t*, size_t>(src + offset(sendCounts, q) * es,
                                                 sendCounts[q] * es);
      },
      [&](int q) {
        return std::pair<uint8_t*, size_t>(dst + offset(recvCounts, q) * es, recvCounts[q] * es);
      });
}

}  // namespace chorus::algo
