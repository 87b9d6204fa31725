// Pipelined double-binary-tree all-reduce. The buffer is split in two halves; half t is reduced
// up tree t (algo/tree_pattern.h) to its root, which computes the final values (and divides for
// kAvg), and broadcast back down the same tree. Each half is cut into segments of
// Group::segmentBytes that follow one another through the trees, so a segment goes down while
// later ones still go up, and as every rank is interior in at most one tree, no rank forwards
// more than about twice its buffer.
//
// Schedule. Every message has a tick, computed alike by sender and receiver from the tree shape:
// segment k leaves a rank of height h for its parent at tick k + h, and leaves a rank of depth d
// for its children at tick k + H + d (H: the tree's height; the root sends at k + H). Each rank
// runs the ticks in order, and at tick T first posts its sends of tick T (each depends only on
// receives of earlier ticks, already complete), then posts the receives of ticks up to
// T + kLookahead, then completes the receives of tick T. Sends and receives are posted in
// (tick, tree) order, so on every link both ends agree on the message order. No deadlock: a rank
// that waits at tick T waits for a message its peer sends at tick T, which the peer posts once it
// has completed its receives of earlier ticks; by induction on T every rank gets there. A wait on
// an old send (to reuse its request) waits for a receiver that is behind, whose own waits are
// for still earlier ticks.
//
// Results are bit-identical across ranks: each element is combined only on the way up, as
// (left child's partial) op (own value) op (right child's partial), in an order fixed by the tree
// shape, finished once at its tree's root and then copied down.
#include "algo/collectives.h"
#include "algo/copy.h"
#include "algo/tree_pattern.h"
#include "reduce/internal_types.h"
#include "reduce/reduce.h"

#include <algorithm>
#include <cstdint>

namespace chorus::algo {
namespace {

constexpr int kLookahead = 3;               // receives are posted this many ticks ahead
constexpr int kRecvTicks = kLookahead + 1;  // ticks whose receives are posted at once
constexpr int kSendTicks = 8;               // ticks whose sends may still be pending
constexpr int kPerTick = 6;  // per rank and tick: <= 3 sends and <= 3 receives in each tree

enum Dir : uint32_t { kUp = 0, kDown = 1 };

uint32_t stepTag(size_t k, int tree, Dir dir) {
  return static_cast<uint32_t>(k * 4 + static_cast<size_t>(tree) * 2 + dir);
}

struct Half {
  TreeNode node;
  size_t first = 0;  // first element of this half
  size_t count = 0;
  size_t segs = 0;
  int firstChild = 0;          // the child whose partial of a segment arrives first
  int slotBase[2] = {-1, -1};  // receive slots of each child's partials
  long long downTick = 0;      // tick of segment 0 going down from this rank
  bool interior() const { return node.child[0] >= 0; }
};

// Segment k of h, or -1 when tick - offset is no segment.
long long segmentAt(const Half& h, long long tick, long long offset) {
  const long long k = tick - offset;
  return k >= 0 && static_cast<size_t>(k) < h.segs ? k : -1;
}

}  // namespace

void doubleTreeAllReduce(const Group& g, const void* in, void* out, size_t count, DataType dtype,
                         ReduceOp op) {
  const int n = g.size;
  const size_t es = reduce::elementSize(dtype);
  if (count == 0) return;
  if (n == 1) {
    if (in != out) moveBytes(dtype, out, in, count * es);
    return;
  }
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  const size_t segElems = std::max<size_t>(1, g.segmentBytes / es);
  const reduce::ReduceFn fn = reduce::reduceFn(dtype, op);

  Half halves[2];
  halves[0].count = (count + 1) / 2;
  halves[1].first = halves[0].count;
  halves[1].count = count / 2;
  int slots = 0;
  long long end = 0;  // one past the last tick with anything to do on this rank
  for (int t = 0; t < 2; ++t) {
    Half& h = halves[t];
    h.node = treeNode(g.rank, n, t);
    h.segs = (h.count + segElems - 1) / segElems;
    h.firstChild = h.node.child[1] >= 0 && h.node.childHeight[1] < h.node.childHeight[0] ? 1 : 0;
    h.downTick = h.node.rootHeight + h.node.depth;
    if (h.segs == 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (h.node.child[i] >= 0) h.slotBase[i] = (slots++) * kRecvTicks;
    }
    end = std::max(end, static_cast<long long>(h.segs) + h.downTick);
  }
  const size_t slotBytes = std::min(segElems, halves[0].count) * es;
  uint8_t* partials =
      slots ? g.scratch->bytes(slotBytes * static_cast<size_t>(slots * kRecvTicks)) : nullptr;
  auto& sends = g.scratch->sends(kSendTicks * kPerTick);
  auto& recvs = g.scratch->recvs(kRecvTicks * kPerTick);

  auto elems = [&](const Half& h, long long k) {
    return std::min(segElems, h.count - static_cast<size_t>(k) * segElems);
  };
  auto offset = [&](const Half& h, long long k) {
    return (h.first + static_cast<size_t>(k) * segElems) * es;
  };
  auto slot = [&](const Half& h, int i, long long tick) {
    return partials + slotBytes * static_cast<size_t>(h.slotBase[i] + tick % kRecvTicks);
  };
  auto recvAt = [&](long long tick, int t, int j) -> transport::Request& {
    return recvs[static_cast<size_t>((tick % kRecvTicks) * kPerTick + t * 3 + j)];
  };
  auto send = [&](long long tick, int t, int j, int peer, const uint8_t* data, size_t bytes,
                  uint32_t tag) {
    transport::Request& q = sends[static_cast<size_t>((tick % kSendTicks) * kPerTick + t * 3 + j)];
    g.wait(q);  // the send kSendTicks ticks ago
    g.tx->postSend(q, peer, data, bytes, tag);
  };

  // Receives of one tick, in the order every sender posts them: tree 0 before tree 1; the
  // children's partials land in slots, the final values straight in the output.
  auto postRecvs = [&](long long tick) {
    for (int t = 0; t < 2; ++t) {
      const Half& h = halves[t];
      if (h.segs == 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (h.node.child[i] < 0) continue;
        const long long k = segmentAt(h, tick, h.node.childHeight[i]);
        if (k < 0) continue;
        g.tx->postRecv(recvAt(tick, t, i), h.node.child[i], slot(h, i, tick), elems(h, k) * es,
                       stepTag(static_cast<size_t>(k), t, kUp));
      }
      const long long k = h.node.parent >= 0 ? segmentAt(h, tick, h.downTick - 1) : -1;
      if (k >= 0) {
        g.tx->postRecv(recvAt(tick, t, 2), h.node.parent, dst + offset(h, k), elems(h, k) * es,
                       stepTag(static_cast<size_t>(k), t, kDown));
      }
    }
  };

  long long posted = -1;  // receives are posted for every tick <= posted
  for (long long tick = 0; tick < end; ++tick) {
    for (int t = 0; t < 2; ++t) {
      const Half& h = halves[t];
      if (h.segs == 0) continue;
      const TreeNode& nd = h.node;
      if (nd.parent >= 0) {
        const long long k = segmentAt(h, tick, nd.height);
        if (k >= 0) {
          // A leaf sends its input; an interior rank the partial it combined in the output.
          const uint8_t* data = (h.interior() ? dst : src) + offset(h, k);
          send(tick, t, 0, nd.parent, data, elems(h, k) * es,
               stepTag(static_cast<size_t>(k), t, kUp));
        }
      }
      if (h.interior()) {
        const long long k = segmentAt(h, tick, h.downTick);
        if (k >= 0) {
          uint8_t* seg = dst + offset(h, k);
          if (nd.parent < 0 && op == ReduceOp::kAvg) reduce::divide(seg, elems(h, k), dtype, n);
          for (int i = 0; i < 2; ++i) {
            if (nd.child[i] >= 0) {
              send(tick, t, 1 + i, nd.child[i], seg, elems(h, k) * es,
                   stepTag(static_cast<size_t>(k), t, kDown));
            }
          }
        }
      }
    }
    while (posted < tick + kLookahead) postRecvs(++posted);
    for (int t = 0; t < 2; ++t) {
      const Half& h = halves[t];
      if (h.segs == 0) continue;
      const TreeNode& nd = h.node;
      for (int i = 0; i < 2; ++i) {
        if (nd.child[i] < 0) continue;
        const long long k = segmentAt(h, tick, nd.childHeight[i]);
        if (k < 0) continue;
        g.wait(recvAt(tick, t, i));
        // Fixed operand order: left partial, own value, right partial. The output holds the
        // accumulated value once the first child's partial is in (in place: over the input).
        uint8_t* acc = dst + offset(h, k);
        const uint8_t* own = src + offset(h, k);
        const uint8_t* part = slot(h, i, tick);
        const size_t m = elems(h, k);
        if (i == h.firstChild) {
          if (i == 0) {
            fn(acc, part, own, m);
          } else {
            fn(acc, own, part, m);
          }
        } else if (i == 0) {
          fn(acc, part, acc, m);
        } else {
          fn(acc, acc, part, m);
        }
      }
      if (nd.parent >= 0 && segmentAt(h, tick, h.downTick - 1) >= 0) g.wait(recvAt(tick, t, 2));
    }
  }
  for (auto& q : sends) g.wait(q);
}

}  // namespace chorus::algo
