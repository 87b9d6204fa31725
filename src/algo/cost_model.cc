// Alpha-beta-gamma estimates of every algorithm (the formulas are derived in docs/algorithms.md).
// They only have to rank the algorithms correctly, not predict absolute times: chorus-sim runs
// the algorithms themselves for that.
#include "algo/select.h"
#include "reduce/wire.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace chorus::algo {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Posting m messages at once costs alpha + (m - 1) * kExtraMessage * alpha: the wire latencies
// overlap, the per-message software cost does not. 0.5 from the emulated 1 Gbit/s cluster, where
// one-shot and two-shot lost to recursive doubling / halving-doubling at 8 ranks at every size
// (bench/compare/algo_sweep.sh, docs/performance-log.md).
constexpr double kExtraMessage = 0.5;
// The hierarchical algorithm pipelines buffers from this size (hierarchical.cc) in this many
// chunks, hiding the shorter of its local and network phases behind the longer.
constexpr size_t kHierPipelineBytes = 8u << 20;
constexpr double kHierChunks = 8;

struct Link {
  double alpha;
  double beta;
};

int floorLog2(int n) {
  int k = 0;
  while ((2 << k) <= n) ++k;
  return k;
}
int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}
bool isPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

// The link flat algorithms see: TCP as soon as the group spans hosts.
Link flatLink(const Placement& w, const Tuning& t) {
  const LinkCost& c = (w.hosts > 1 || !w.sharedLocal) ? t.net : t.shm;
  return Link{c.alpha, c.beta};
}

// Algorithms whose partners at some step are all on other hosts at once make the host's ranks
// share its network link; the ring (ranks placed host by host) crosses each host boundary once.
double sharing(const Placement& w) { return w.hosts > 1 ? std::max(1, w.perHost) : 1; }

double flatAllReduce(AlgorithmId a, double n, int p, double gamma, Link l, double share,
                     double segment) {
  const double pd = p;
  const int k = floorLog2(p);
  const double p2 = static_cast<double>(1 << k);
  const bool folded = (1 << k) != p;
  const double fold = folded ? 2 * (l.alpha + n * l.beta) + n * gamma : 0.0;
  const double beta = l.beta * share;
  switch (a) {
    case AlgorithmId::kRing:
      return 2 * (pd - 1) * l.alpha + 2 * (pd - 1) / pd * n * beta + (pd - 1) / pd * n * gamma;
    case AlgorithmId::kRecursiveDoubling:
      return k * (l.alpha + n * beta + n * gamma) + fold;
    case AlgorithmId::kHalvingDoubling:
      return 2 * k * l.alpha + 2 * (p2 - 1) / p2 * n * beta + (p2 - 1) / p2 * n * gamma + fold;
    case AlgorithmId::kDoubleTree: {
      // Each half climbs and descends a tree of depth ~log2 p in segments. A rank that is
      // interior (two children) in one tree and a leaf in the other moves 2n each way; with two
      // ranks each is the other's only child, n each way, as in the ring.
      const double depth = std::max(1, ceilLog2(p + 1) - 1);
      const double s = std::max(1.0, std::min(segment, n / 2));
      const double moved = p == 2 ? n : 2 * n;
      return 2 * depth * (l.alpha + s * beta) + moved * beta + (p == 2 ? n / 2 : n) * gamma;
    }
    case AlgorithmId::kOneShot:
      // Every rank sends its whole buffer to every other and reduces all of them.
      return l.alpha * (1 + (pd - 2) * kExtraMessage) + (pd - 1) * n * (beta + gamma);
    case AlgorithmId::kTwoShot:
      // A direct reduce-scatter then a direct all-gather: two rounds of p - 1 messages.
      return 2 * l.alpha * (1 + (pd - 2) * kExtraMessage) + 2 * (pd - 1) / pd * n * beta +
             (pd - 1) / pd * n * gamma;
    default:
      return kInf;
  }
}

const AlgorithmId kFlatAllReduce[] = {
    AlgorithmId::kRing,       AlgorithmId::kRecursiveDoubling, AlgorithmId::kHalvingDoubling,
    AlgorithmId::kDoubleTree, AlgorithmId::kOneShot,           AlgorithmId::kTwoShot};

double bestFlat(double n, int p, double gamma, Link l, double share, double segment) {
  if (p <= 1) return 0;
  double best = kInf;
  for (AlgorithmId a : kFlatAllReduce) {
    best = std::min(best, flatAllReduce(a, n, p, gamma, l, share, segment));
  }
  return best;
}

double chainBroadcast(double n, int p, Link l, double segment) {
  if (p <= 1) return 0;
  const double s = std::max(1.0, std::min(segment, n));
  const double segments = std::max(1.0, std::ceil(n / s));
  // The first segment takes p - 1 hops, each later one adds a hop; then the last rank's ack.
  return (p - 2 + segments) * (l.alpha + s * l.beta) + l.alpha;
}

double binomialBroadcast(double n, int p, Link l, double segment) {
  const double s = std::max(1.0, std::min(segment, n));
  const double segments = std::max(1.0, std::ceil(n / s));
  // The root sends every segment to each of its ceil(log2 p) children in turn, and the subtrees
  // forward in its shadow; then the last rank's ack.
  return ceilLog2(p) * segments * (l.alpha + s * l.beta) + l.alpha;
}

double scatterAllGatherBroadcast(double n, int p, Link l, double segment) {
  const double pd = p;
  const double s = std::max(1.0, segment);
  // Scatter down the binomial tree: the root sends (p-1)/p of the buffer, in at least
  // ceil(log2 p) messages (one per child, more where a child's blocks span several segments);
  // the deepest path moves no more than that.
  const double scattered = (pd - 1) / pd * n;
  const double scatter =
      std::max<double>(ceilLog2(p), std::ceil(scattered / s)) * l.alpha + scattered * l.beta;
  // Ring all-gather: p - 1 steps of one block, each block cut into segments; then the ack.
  const double block = n / pd;
  const double blockSegments = std::max(1.0, std::ceil(block / s));
  const double ring = (pd - 1) * blockSegments * (l.alpha + std::min(s, block) * l.beta);
  return scatter + ring + l.alpha;
}

double hierarchical(double n, const Placement& w, double gamma, const Tuning& t, double segment) {
  if (!w.layered()) return kInf;
  const LinkCost& lc = w.sharedLocal ? t.shm : t.net;
  const Link local{lc.alpha, lc.beta};
  const Link net{t.net.alpha, t.net.beta};
  const int L = w.perHost;
  const int H = w.hosts;
  if (!w.even) {
    // All-reduce in the host, among the hosts' leaders, then a broadcast in the host.
    return bestFlat(n, L, gamma, local, 1, segment) + bestFlat(n, H, gamma, net, 1, segment) +
           chainBroadcast(n, L, local, segment);
  }
  const double slice = n / L;
  const double localPhases =
      2 * (L - 1) * (local.alpha + slice * local.beta) + (L - 1) * slice * gamma;
  // The L cross-host groups (one per local rank) share each host's link. Below the pipelining
  // size they run the best flat algorithm; the pipelined form interleaves ring tasks, so its
  // cross-host part is a ring of H ranks (2 (H-1) steps per chunk).
  if (n >= static_cast<double>(kHierPipelineBytes)) {
    const double cross = flatAllReduce(AlgorithmId::kRing, slice, H, gamma, net, L, segment) +
                         (kHierChunks - 1) * 2 * (H - 1) * net.alpha;
    return std::max(localPhases, cross) + std::min(localPhases, cross) / kHierChunks;
  }
  return localPhases + bestFlat(slice, H, gamma, net, L, segment);
}

// The ring all-reduce with a wire format: 2 (p - 1) / p of the wire bytes on each link, and
// per hop a conversion of the segment (encode on send, decode on receive) that costs about one
// f32 reduction pass, two for int8 (a scale per block, a division per value).
double wireRingAllReduce(WireFormat wire, double n, int p, double gamma, Link l) {
  const double pd = p;
  const double wireN = n * reduce::wireRatio(wire);
  const double convert = (wire == WireFormat::kInt8Block ? 2.0 : 1.0) * gamma;
  return 2 * (pd - 1) * l.alpha + 2 * (pd - 1) / pd * wireN * l.beta + (pd - 1) / pd * n * gamma +
         2 * (pd - 1) / pd * n * convert;
}

}  // namespace

double predictSeconds(CollectiveKind kind, AlgorithmId algo, size_t bytes, DataType dtype, int size,
                      const Placement& where, const Tuning& t, size_t segmentBytes,
                      WireFormat wire) {
  if (size <= 1) return algo == AlgorithmId::kNone ? 0.0 : kInf;
  if (wire != WireFormat::kNative) {
    if (kind != CollectiveKind::kAllReduce || algo != AlgorithmId::kRing) return kInf;
    const double gamma = t.gamma[static_cast<size_t>(dtype) % t.gamma.size()];
    return wireRingAllReduce(wire, static_cast<double>(bytes), size, gamma, flatLink(where, t));
  }
  const double n = static_cast<double>(bytes);
  const double p = size;
  const double gamma = t.gamma[static_cast<size_t>(dtype) % t.gamma.size()];
  const double segment = static_cast<double>(std::max<size_t>(1, segmentBytes));
  const Link l = flatLink(where, t);
  switch (kind) {
    case CollectiveKind::kAllReduce:
      if (algo == AlgorithmId::kHierarchical) return hierarchical(n, where, gamma, t, segment);
      return flatAllReduce(algo, n, size, gamma, l,
                           algo == AlgorithmId::kRing ? 1.0 : sharing(where), segment);
    case CollectiveKind::kReduceScatter:
      // n: one rank's block. Halving moves the same p - 1 blocks as the ring in log2 p steps,
      // with partners on other hosts at once (shared links, as for rhd).
      if (algo == AlgorithmId::kHalving) {
        if (!isPowerOfTwo(size)) return kInf;
        return ceilLog2(size) * l.alpha + (p - 1) * n * (l.beta * sharing(where) + gamma);
      }
      if (algo != AlgorithmId::kRing) return kInf;
      return (p - 1) * (l.alpha + n * l.beta + n * gamma);
    case CollectiveKind::kAllGather:
      if (algo == AlgorithmId::kDoubling) {
        if (!isPowerOfTwo(size)) return kInf;
        return ceilLog2(size) * l.alpha + (p - 1) * n * l.beta * sharing(where);
      }
      if (algo != AlgorithmId::kRing) return kInf;
      return (p - 1) * (l.alpha + n * l.beta);
    case CollectiveKind::kBroadcast:
      switch (algo) {
        case AlgorithmId::kChain:
          return chainBroadcast(n, size, l, segment);
        case AlgorithmId::kBinomial:
          return binomialBroadcast(n, size, l, segment);
        case AlgorithmId::kScatterAllGather:
          return scatterAllGatherBroadcast(n, size, l, segment);
        default:
          return kInf;
      }
    case CollectiveKind::kBarrier:
      if (algo != AlgorithmId::kDissemination) return kInf;
      return ceilLog2(size) * l.alpha;
    // reduce: binomial moves the whole buffer up ceil(log2 p) levels, reduced at each;
    // ring_gather reduces p blocks round the ring, then the root takes p - 1 of them.
    case CollectiveKind::kReduce:
      if (algo == AlgorithmId::kBinomial)
        return ceilLog2(size) * (l.alpha + n * l.beta + n * gamma);
      if (algo != AlgorithmId::kRingGather) return kInf;
      return (p - 1) * (l.alpha + n / p * (l.beta + gamma)) + (p - 1) * (l.alpha + n / p * l.beta);
    // One algorithm each below (the choice is trivial); the estimate is for CHORUS_DEBUG.
    // n: one rank's block; the root's link carries p - 1 of them.
    case CollectiveKind::kSendRecv:
      if (algo != AlgorithmId::kDirect) return kInf;
      return l.alpha + n * l.beta;
    case CollectiveKind::kGather:
    case CollectiveKind::kScatter:
      if (algo != AlgorithmId::kDirect) return kInf;
      return (p - 1) * (l.alpha + n * l.beta);
    // n: the total; p - 1 ring steps of an average block.
    case CollectiveKind::kAllGatherV:
      if (algo != AlgorithmId::kRing) return kInf;
      return (p - 1) * (l.alpha + n / p * l.beta);
    case CollectiveKind::kReduceScatterV:
      if (algo != AlgorithmId::kRing) return kInf;
      return (p - 1) * (l.alpha + n / p * (l.beta + gamma));
    // n: one block (all-to-all-v: unknown, 0); p - 1 blocks out and in over shared links.
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kAllToAllV:
      if (algo != AlgorithmId::kPairwise) return kInf;
      return (p - 1) * (l.alpha + n * l.beta * sharing(where));
  }
  return kInf;
}

}  // namespace chorus::algo
