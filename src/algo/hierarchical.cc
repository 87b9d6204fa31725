// Hierarchical all-reduce, composed from the flat collectives over subgroups:
//   even layout (H hosts x L ranks): reduce-scatter within the host into L slices, all-reduce of
//   slice j across hosts among the local ranks j (L cross-host all-reduces in parallel, so every
//   host link carries 2(H-1)/H of the buffer once), then all-gather within the host;
//   uneven layout: all-reduce within the host, all-reduce across the hosts' leaders, broadcast
//   from the leader within the host.
// Every rank ends with the same bits: each slice is reduced once, by one cross-host all-reduce
// (itself bit-identical across its members), and only copied after that.
#include "algo/collectives.h"
#include "algo/copy.h"
#include "algo/hierarchy.h"
#include "algo/ring.h"
#include "algo/ring_pattern.h"
#include "algo/select.h"
#include "reduce/internal_types.h"
#include "reduce/reduce.h"

#include <chorus/error.hpp>

#include <algorithm>
#include <optional>
#include <vector>

namespace chorus::algo {

std::unique_ptr<Hierarchy> makeHierarchy(const Group& g, const std::vector<std::string>& hostIds,
                                         const Options& options) {
  return makeHierarchy(g, std::make_shared<const Topology>(topologyOf(hostIds)), options);
}

std::unique_ptr<Hierarchy> makeHierarchy(const Group& g, std::shared_ptr<const Topology> topo,
                                         const Options& options) {
  if (!topo->layered()) return nullptr;
  auto h = std::make_unique<Hierarchy>();
  h->topo = std::move(topo);
  const Topology& t = *h->topo;
  const int me = g.rank;
  h->hostIndex = t.hostOf[static_cast<size_t>(me)];
  const int localRank = t.localRank[static_cast<size_t>(me)];
  auto subgroup = [&](Group& sub, std::unique_ptr<SubTransport>& tx, std::vector<int> members) {
    // This rank is in every subgroup built for it (its host; its local rank's cross group).
    const int rank =
        static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
    sub = g;
    sub.hier = nullptr;
    sub.scratch = &sub == &h->local ? &h->localScratch : &h->crossScratch;
    sub.rank = rank;
    sub.size = static_cast<int>(members.size());
    tx = std::make_unique<SubTransport>(g.tx, std::move(members));
    sub.tx = tx.get();
  };
  subgroup(h->local, h->localTx, t.hosts[static_cast<size_t>(h->hostIndex)]);
  // The host's group stays on this machine (shared memory, or TCP over loopback).
  h->local.tcpSegmentBytes = 0;
  h->inCross = t.even || localRank == 0;
  if (h->inCross) {
    std::vector<int> cross;
    for (const auto& host : t.hosts) cross.push_back(host[static_cast<size_t>(localRank)]);
    subgroup(h->cross, h->crossTx, std::move(cross));
  }
  h->subOptions = options;
  h->subOptions.algorithm = AlgorithmSetting{};
  return h;
}

namespace {

void runSub(const Hierarchy& h, const Group& sub, const void* in, void* out, size_t count,
            DataType dtype, ReduceOp op) {
  // The host's group is one host; the cross-host group has one rank per host.
  const bool sharedLocal = h.subOptions.transport != TransportKind::kTcp;
  const Placement where = &sub == &h.local ? Placement{1, sub.size, true, sharedLocal}
                                           : Placement{sub.size, 1, true, sharedLocal};
  AlgorithmId algo = chooseAlgorithm(CollectiveKind::kAllReduce, count * reduce::elementSize(dtype),
                                     dtype, sub.size, where, h.subOptions)
                         .algo;
  allReduceWith(sub, algo, in, out, count, dtype, op);
}

// Large buffers on an even layout, in K chunks: while chunk k crosses the network, the host
// reduces chunk k+1 and gathers chunk k-1, so the local phases hide behind the network instead of
// adding to it. The host's rings run in one fixed order on every rank (RS0, RS1, AG0, RS2, AG1,
// ..., AG(K-1)) and the cross-host rings in chunk order, so messages between any two ranks keep
// the same order on both sides; the two kinds have no peer in common.
void pipelinedAllReduce(const Group& g, const Hierarchy& h, const void* in, void* out, size_t count,
                        DataType dtype, ReduceOp op, int chunks) {
  const size_t esize = reduce::elementSize(dtype);
  const ReduceOp partial = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  struct Chunk {
    size_t offset, count;    // elements of the buffer
    size_t sliceOffset = 0;  // this rank's slice, in elements of the buffer
    size_t sliceCount = 0;
    bool reduced = false;  // local reduce-scatter done
    bool crossed = false;  // cross-host all-reduce done
  };
  std::vector<Chunk> cs;
  for (int k = 0; k < chunks; ++k) {
    Block b = balancedBlock(count, chunks, k);
    Block mine = balancedBlock(b.count, h.local.size, h.local.rank);
    cs.push_back(Chunk{b.offset, b.count, b.offset + mine.offset, mine.count});
  }
  struct LocalStep {
    bool gather;
    int chunk;
  };
  std::vector<LocalStep> order{{false, 0}};
  for (int k = 1; k < chunks; ++k) {
    order.push_back({false, k});
    order.push_back({true, k - 1});
  }
  order.push_back({true, chunks - 1});

  std::optional<RingTask> local, cross;
  size_t nextLocal = 0;
  int localChunk = -1, crossChunk = -1, nextCross = 0;
  StallWatch stall(g);
  while (nextLocal < order.size() || local || nextCross < chunks || cross) {
    bool progressed = false;
    if (!local && nextLocal < order.size()) {
      const LocalStep& st = order[nextLocal];
      Chunk& c = cs[static_cast<size_t>(st.chunk)];
      if (!st.gather || c.crossed) {
        uint8_t* chunk = dst + c.offset * esize;
        local.emplace(h.local, st.gather ? RingSpec::allGather(h.local, chunk, c.count, dtype)
                                         : RingSpec::reduceScatter(h.local, src + c.offset * esize,
                                                                   chunk, c.count, dtype, partial));
        localChunk = st.chunk;
      }
    }
    if (local) {
      progressed |= local->advance();
      if (local->done()) {
        if (!order[nextLocal].gather) cs[static_cast<size_t>(localChunk)].reduced = true;
        local.reset();
        ++nextLocal;
        progressed = true;
      }
    }
    if (!cross && nextCross < chunks && cs[static_cast<size_t>(nextCross)].reduced) {
      Chunk& c = cs[static_cast<size_t>(nextCross)];
      uint8_t* slice = dst + c.sliceOffset * esize;
      cross.emplace(h.cross,
                    RingSpec::allReduce(h.cross, slice, slice, c.sliceCount, dtype, partial));
      crossChunk = nextCross++;
    }
    if (cross) {
      progressed |= cross->advance();
      if (cross->done()) {
        Chunk& c = cs[static_cast<size_t>(crossChunk)];
        if (op == ReduceOp::kAvg && c.sliceCount > 0) {
          reduce::divide(dst + c.sliceOffset * esize, c.sliceCount, dtype, g.size);
        }
        c.crossed = true;
        cross.reset();
        progressed = true;
      }
    }
    if (progressed) {
      stall.progressed();
      continue;
    }
    stall.idle(cross ? cross->blocker() : local->blocker());
  }
}

}  // namespace

void hierarchicalAllReduce(const Group& g, const void* in, void* out, size_t count, DataType dtype,
                           ReduceOp op) {
  if (!g.hier) throw Error(ErrorCode::kInternal, "hierarchical all-reduce without subgroups");
  const Hierarchy& h = *g.hier;
  const size_t esize = reduce::elementSize(dtype);
  auto* data = static_cast<uint8_t*>(out);
  // Averages are sums until the very end, divided once by the whole group's size.
  const ReduceOp partial = op == ReduceOp::kAvg ? ReduceOp::kSum : op;

  if (!h.topo->even) {
    runSub(h, h.local, in, out, count, dtype, partial);
    if (h.inCross) {
      runSub(h, h.cross, out, out, count, dtype, partial);
      if (op == ReduceOp::kAvg) reduce::divide(data, count, dtype, g.size);
    }
    if (h.local.size > 1) chainBroadcast(h.local, data, count * esize, 0);
    return;
  }

  // Pipelining pays from a few MiB on: each chunk's slices should still fill TCP segments.
  constexpr size_t kChunkBytes = 4u << 20;
  const size_t bytes = count * esize;
  if (bytes >= 2 * kChunkBytes) {
    int chunks = static_cast<int>(std::min<size_t>(8, bytes / kChunkBytes));
    pipelinedAllReduce(g, h, in, out, count, dtype, op, chunks);
    return;
  }

  const Group& local = h.local;
  const Block mine = balancedBlock(count, local.size, local.rank);
  uint8_t* slice = data + mine.offset * esize;
  if (local.size > 1) {
    ringRun(local, RingSpec::reduceScatter(local, in, data, count, dtype, partial));  // to slice
  } else if (in != out) {
    copyBytes(dtype, data, in, count * esize);
  }
  if (mine.count > 0) {
    runSub(h, h.cross, slice, slice, mine.count, dtype, partial);
    if (op == ReduceOp::kAvg) reduce::divide(slice, mine.count, dtype, g.size);
  }
  if (local.size > 1) ringRun(local, RingSpec::allGather(local, data, count, dtype));
}

}  // namespace chorus::algo
