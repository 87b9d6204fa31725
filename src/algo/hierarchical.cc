// Hierarchical all-reduce, composed from the flat collectives over subgroups:
//   even layout (H hosts x L ranks): reduce-scatter within the host into L slices, all-reduce of
//   slice j across hosts among the local ranks j (L cross-host all-reduces in parallel, so every
//   host link carries 2(H-1)/H of the buffer once), then all-gather within the host;
//   uneven layout: all-reduce within the host, all-reduce across the hosts' leaders, broadcast
//   from the leader within the host.
// Every rank ends with the same bits: each slice is reduced once, by one cross-host all-reduce
// (itself bit-identical across its members), and only copied after that.
#include "algo/collectives.h"
#include "algo/hierarchy.h"
#include "algo/ring.h"
#include "algo/ring_pattern.h"
#include "reduce/reduce.h"

#include <chorus/error.hpp>

#include <cstring>

namespace chorus::algo {

std::unique_ptr<Hierarchy> makeHierarchy(const Group& g, const std::vector<std::string>& hostIds,
                                         const Options& options) {
  Topology topo = topologyOf(hostIds);
  if (!topo.layered()) return nullptr;
  auto h = std::make_unique<Hierarchy>();
  h->topo = std::move(topo);
  const Topology& t = h->topo;
  const int me = g.rank;
  h->hostIndex = t.hostOf[static_cast<size_t>(me)];
  const int localRank = t.localRank[static_cast<size_t>(me)];
  auto subgroup = [&](Group& sub, std::unique_ptr<SubTransport>& tx, std::vector<int> members) {
    int rank = 0;
    while (members[static_cast<size_t>(rank)] != me) ++rank;
    sub = g;
    sub.hier = nullptr;
    sub.rank = rank;
    sub.size = static_cast<int>(members.size());
    tx = std::make_unique<SubTransport>(g.tx, std::move(members));
    sub.tx = tx.get();
  };
  subgroup(h->local, h->localTx, t.hosts[static_cast<size_t>(h->hostIndex)]);
  h->inCross = t.even || localRank == 0;
  if (h->inCross) {
    std::vector<int> cross;
    for (const auto& host : t.hosts) cross.push_back(host[static_cast<size_t>(localRank)]);
    subgroup(h->cross, h->crossTx, std::move(cross));
  }
  h->subOptions = options;
  h->subOptions.algorithm = "auto";
  return h;
}

namespace {

void runSub(const Hierarchy& h, const Group& sub, const void* in, void* out, size_t count,
            DataType dtype, ReduceOp op) {
  AlgorithmId algo =
      selectAlgorithm(CollectiveKind::kAllReduce, count * sizeOf(dtype), sub.size, h.subOptions);
  allReduceWith(sub, algo, in, out, count, dtype, op);
}

}  // namespace

void hierarchicalAllReduce(const Group& g, const void* in, void* out, size_t count, DataType dtype,
                           ReduceOp op) {
  if (!g.hier) throw Error(ErrorCode::kInternal, "hierarchical all-reduce without subgroups");
  const Hierarchy& h = *g.hier;
  const size_t esize = sizeOf(dtype);
  auto* data = static_cast<uint8_t*>(out);
  // Averages are sums until the very end, divided once by the whole group's size.
  const ReduceOp partial = op == ReduceOp::kAvg ? ReduceOp::kSum : op;

  if (!h.topo.even) {
    runSub(h, h.local, in, out, count, dtype, partial);
    if (h.inCross) {
      runSub(h, h.cross, out, out, count, dtype, partial);
      if (op == ReduceOp::kAvg) reduce::divide(data, count, dtype, g.size);
    }
    if (h.local.size > 1) chainBroadcast(h.local, data, count * esize, 0);
    return;
  }

  const Group& local = h.local;
  const Block mine = balancedBlock(count, local.size, local.rank);
  uint8_t* slice = data + mine.offset * esize;
  if (local.size > 1) {
    RingSpec rs;
    rs.in = static_cast<const uint8_t*>(in);
    rs.acc = data;
    rs.own = slice;
    rs.totalCount = count;
    rs.dtype = dtype;
    rs.op = partial;
    rs.gather = false;
    ringRun(local, rs);
  } else if (in != out) {
    std::memcpy(data, in, count * esize);
  }
  if (mine.count > 0) {
    runSub(h, h.cross, slice, slice, mine.count, dtype, partial);
    if (op == ReduceOp::kAvg) reduce::divide(slice, mine.count, dtype, g.size);
  }
  if (local.size > 1) {
    RingSpec ag;
    ag.acc = data;
    ag.own = slice;
    ag.totalCount = count;
    ag.dtype = dtype;
    ag.reduce = false;
    ringRun(local, ag);
  }
}

}  // namespace chorus::algo
