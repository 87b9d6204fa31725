// The symbolic checker: every collective algorithm, run by the real algorithm code over the
// virtual network (src/sim) on symbolic elements (sim/symbolic.h), for every world size 1..64,
// many counts, segment sizes that cut blocks into several segments, and several host layouts
// for the hierarchical all-reduce. Each output element must hold exactly the contributions its
// collective promises, once each, at the right place.
#include "sim/symbolic.h"
#include "algo/collectives.h"
#include "algo/select.h"
#include "core/validate.h"
#include "reduce/internal_types.h"
#include "sim/virtual_world.h"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace chorus::sim {
namespace {

using Elements = std::vector<SymElement>;
constexpr DataType kSym = reduce::kSymbolic;

class Symbolic : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { installSymbolicKernels(); }
};

constexpr CollectiveKind kOtherKinds[] = {
    CollectiveKind::kReduceScatter, CollectiveKind::kAllGather,  CollectiveKind::kBroadcast,
    CollectiveKind::kBarrier,       CollectiveKind::kReduce,     CollectiveKind::kGather,
    CollectiveKind::kScatter,       CollectiveKind::kAllGatherV, CollectiveKind::kReduceScatterV,
    CollectiveKind::kAllToAll,      CollectiveKind::kAllToAllV};

bool listed(CollectiveKind kind, AlgorithmId id) {
  const auto& ids = algo::algorithmsFor(kind);
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// Every AlgorithmId with a name, found by asking toString (so new ones are checked without
// editing this file), minus the ones that are not all-reduce algorithms: kNone is the copy of a
// group of one, and those that only other collectives list (chain, dissemination, ...) are no
// all-reduce at all (allReduceWith refuses them).
std::vector<AlgorithmId> allReduceAlgorithms() {
  std::vector<AlgorithmId> ids;
  for (int v = 0; v < 256; ++v) {
    const auto id = static_cast<AlgorithmId>(v);
    if (std::string(toString(id)) == "unknown-algorithm") continue;
    if (id == AlgorithmId::kNone) continue;
    bool otherOnly = false;
    for (CollectiveKind k : kOtherKinds) {
      otherOnly = otherOnly || (listed(k, id) && !listed(CollectiveKind::kAllReduce, id));
    }
    if (!otherOnly) ids.push_back(id);
  }
  return ids;
}

// The algorithms that must accept every world size >= 2 (on a layered layout for kHierarchical).
bool mustAccept(AlgorithmId id) {
  switch (id) {
    case AlgorithmId::kRing:
    case AlgorithmId::kRecursiveDoubling:
    case AlgorithmId::kHalvingDoubling:
    case AlgorithmId::kOneShot:
    case AlgorithmId::kTwoShot:
    case AlgorithmId::kHierarchical:
    case AlgorithmId::kChain:
    case AlgorithmId::kBinomial:
    case AlgorithmId::kScatterAllGather:
    case AlgorithmId::kDirect:
    case AlgorithmId::kPairwise:
    case AlgorithmId::kRingGather:
      return true;
    default:
      return false;
  }
}

std::string label(const char* what, AlgorithmId algo, int n, size_t count,
                  const std::string& extra) {
  return std::string(what) + "[" + toString(algo) + "] n=" + std::to_string(n) +
         " count=" + std::to_string(count) + extra;
}

// Compares got with want for every rank; "" when all match, else the first few differences.
std::string compare(const std::vector<Elements>& got, const std::vector<Elements>& want) {
  std::string s;
  size_t bad = 0;
  for (size_t r = 0; r < got.size(); ++r) {
    for (size_t i = 0; i < want[r].size(); ++i) {
      if (got[r][i] == want[r][i]) continue;
      if (++bad <= 4) {
        s += "\n    rank " + std::to_string(r) + " element " + std::to_string(i) + ": " +
             describeSymbolic(got[r][i], want[r][i]);
      }
    }
  }
  if (bad > 4) s += "\n    ... " + std::to_string(bad) + " wrong elements in all";
  return s;
}

struct Outcome {
  bool refused = false;  // every rank threw before any message: the algorithm declines this case
  std::string failure;   // "" when correct
};

Outcome finish(const RunResult& res, const std::vector<Elements>& got,
               const std::vector<Elements>& want) {
  Outcome o;
  if (!res.ok) {
    o.refused = res.messages == 0;
    o.failure = res.error;
    return o;
  }
  o.failure = compare(got, want);
  return o;
}

uint32_t expectedFlags(ReduceOp op, int n) {
  return op == ReduceOp::kAvg && n > 1 ? static_cast<uint32_t>(kSymDivided) : 0u;
}

OpDesc desc(CollectiveKind kind, size_t count, ReduceOp op, AlgorithmId algo, int root = 0) {
  OpDesc d = OpDesc::of(kind, count, kSym, op, root);
  d.algo = algo;
  return d;
}

// All-reduce with a given algorithm (viaRun: through algo::run with the selected algorithm).
Outcome allReduce(VirtualWorld& w, AlgorithmId algo, size_t count, ReduceOp op, bool inPlace,
                  bool viaRun = false) {
  const int n = w.size();
  std::vector<Elements> in(static_cast<size_t>(n)), out(static_cast<size_t>(n)),
      want(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      in[static_cast<size_t>(r)].push_back(symInput(static_cast<uint32_t>(i), r));
      want[static_cast<size_t>(r)].push_back(
          SymElement{static_cast<uint32_t>(i), expectedFlags(op, n), symAllRanks(n)});
    }
    out[static_cast<size_t>(r)].assign(count, symPoison());
  }
  const OpDesc d = desc(CollectiveKind::kAllReduce, count, op, algo);
  setSymbolicDivisor(n);
  RunResult res = w.run([&](int r) {
    const algo::Group& g = w.group(r);
    g.tx->beginOp(d);
    SymElement* o =
        inPlace ? in[static_cast<size_t>(r)].data() : out[static_cast<size_t>(r)].data();
    if (viaRun) {
      algo::run(g, algo::Args{d, in[static_cast<size_t>(r)].data(), o});
    } else {
      algo::allReduceWith(g, algo, in[static_cast<size_t>(r)].data(), o, count, kSym, op);
    }
  });
  return finish(res, inPlace ? in : out, want);
}

Outcome reduceScatter(VirtualWorld& w, AlgorithmId algo, size_t count, ReduceOp op) {
  const int n = w.size();
  const size_t total = count * static_cast<size_t>(n);
  std::vector<Elements> in(static_cast<size_t>(n)), out(static_cast<size_t>(n)),
      want(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < total; ++i) {
      in[static_cast<size_t>(r)].push_back(symInput(static_cast<uint32_t>(i), r));
    }
    for (size_t k = 0; k < count; ++k) {
      want[static_cast<size_t>(r)].push_back(
          SymElement{static_cast<uint32_t>(static_cast<size_t>(r) * count + k),
                     expectedFlags(op, n), symAllRanks(n)});
    }
    out[static_cast<size_t>(r)].assign(count, symPoison());
  }
  const OpDesc d = desc(CollectiveKind::kReduceScatter, count, op, algo);
  setSymbolicDivisor(n);
  RunResult res = w.run([&](int r) {
    const algo::Group& g = w.group(r);
    g.tx->beginOp(d);
    algo::run(g,
              algo::Args{d, in[static_cast<size_t>(r)].data(), out[static_cast<size_t>(r)].data()});
  });
  return finish(res, out, want);
}

Outcome allGather(VirtualWorld& w, AlgorithmId algo, size_t count, bool inPlace) {
  const int n = w.size();
  const size_t total = count * static_cast<size_t>(n);
  std::vector<Elements> in(static_cast<size_t>(n)), out(static_cast<size_t>(n)),
      want(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    out[static_cast<size_t>(r)].assign(total, symPoison());
    for (size_t k = 0; k < count; ++k) {
      const auto index = static_cast<uint32_t>(static_cast<size_t>(r) * count + k);
      in[static_cast<size_t>(r)].push_back(symInput(index, r));
      if (inPlace) {
        out[static_cast<size_t>(r)][static_cast<size_t>(r) * count + k] = symInput(index, r);
      }
    }
    for (size_t i = 0; i < total; ++i) {
      want[static_cast<size_t>(r)].push_back(
          symInput(static_cast<uint32_t>(i), static_cast<int>(i / count)));
    }
  }
  const OpDesc d = desc(CollectiveKind::kAllGather, count, ReduceOp::kSum, algo);
  RunResult res = w.run([&](int r) {
    const algo::Group& g = w.group(r);
    g.tx->beginOp(d);
    SymElement* o = out[static_cast<size_t>(r)].data();
    const SymElement* i =
        inPlace ? o + static_cast<size_t>(r) * count : in[static_cast<size_t>(r)].data();
    algo::run(g, algo::Args{d, i, o});
  });
  return finish(res, out, want);
}

Outcome broadcast(VirtualWorld& w, AlgorithmId algo, size_t count, int root) {
  const int n = w.size();
  std::vector<Elements> buf(static_cast<size_t>(n)), want(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      const SymElement e = symInput(static_cast<uint32_t>(i), root);
      buf[static_cast<size_t>(r)].push_back(r == root ? e : symPoison());
      want[static_cast<size_t>(r)].push_back(e);
    }
  }
  const OpDesc d = desc(CollectiveKind::kBroadcast, count, ReduceOp::kSum, algo, root);
  RunResult res = w.run([&](int r) {
    const algo::Group& g = w.group(r);
    g.tx->beginOp(d);
    algo::run(
        g, algo::Args{d, buf[static_cast<size_t>(r)].data(), buf[static_cast<size_t>(r)].data()});
  });
  return finish(res, buf, want);
}

Outcome barrier(VirtualWorld& w) {
  const OpDesc d = desc(CollectiveKind::kBarrier, 0, ReduceOp::kSum,
                        algo::selectAlgorithm(CollectiveKind::kBarrier, 0, w.size(), {}));
  RunResult res = w.run([&](int r) {
    const algo::Group& g = w.group(r);
    g.tx->beginOp(d);
    algo::run(g, algo::Args{d, nullptr, nullptr});
  });
  return finish(res, {}, {});
}

// Counts for world size n: the edges around n, primes, counts not divisible by n, and counts
// that give every block several segments of kSegmentElems.
std::vector<size_t> countsFor(int n) {
  const auto un = static_cast<size_t>(n);
  std::set<size_t> c{0, 1, 2, un - 1, un, un + 1, 7, 31, 2 * un + 3, 7 * un + 5};
  if (n <= 16) c.insert({13, 3 * un - 1, 97});
  return {c.begin(), c.end()};
}

// Counts per block (reduce-scatter, all-gather: the buffers hold n blocks): a block of 4 or more
// elements already spans several segments.
std::vector<size_t> blockCountsFor(int n) {
  const auto un = static_cast<size_t>(n);
  std::set<size_t> c{0, 1, 2, 7, un + 1};
  if (n <= 16) c.insert({13, un - 1, 2 * un + 3});
  return {c.begin(), c.end()};
}

constexpr size_t kSegmentElems = 3;  // small segments: blocks of a few elements cut into several

WorldConfig configFor(int n, std::vector<int> hostOf = {}) {
  WorldConfig c;
  c.size = n;
  c.hostOf = std::move(hostOf);
  c.options.segmentBytes = kSegmentElems * sizeof(SymElement);
  return c;
}

// Gathers failures per test and prints what was declined, once.
struct Report {
  std::map<std::string, std::set<int>> refused;  // "algo (reason)" -> world sizes
  int runs = 0;
  void check(const std::string& what, const Outcome& o, AlgorithmId algo, int n) {
    ++runs;
    if (o.refused && !mustAccept(algo)) {
      refused[std::string(toString(algo)) + ": " + o.failure.substr(0, 120)].insert(n);
      return;
    }
    if (!o.failure.empty()) {
      ADD_FAILURE() << what << ":" << (o.failure[0] == '\n' ? "" : " ") << o.failure;
    }
  }
  void print() const {
    for (const auto& [why, sizes] : refused) {
      std::printf("declined (not a failure): %s, n in [%d..%d] (%zu sizes)\n", why.c_str(),
                  *sizes.begin(), *sizes.rbegin(), sizes.size());
    }
  }
};

TEST_F(Symbolic, AllReduceEveryAlgorithmEveryWorldSize) {
  const auto start = std::chrono::steady_clock::now();
  Report rep;
  const std::vector<AlgorithmId> algos = allReduceAlgorithms();
  for (int n = 1; n <= 64; ++n) {
    VirtualWorld w(configFor(n));
    const std::vector<size_t> counts = countsFor(n);
    // A group of one only ever runs kNone: selectAlgorithm returns it before anything else.
    // (The others do not expect one: ring and rhd would leave an out-of-place output unwritten,
    // oneshot and twoshot read past their scratch.)
    if (n == 1) {
      for (size_t count : counts) {
        rep.check(label("allreduce", AlgorithmId::kNone, n, count, ""),
                  allReduce(w, AlgorithmId::kNone, count, ReduceOp::kSum, false),
                  AlgorithmId::kNone, n);
      }
      continue;
    }
    for (AlgorithmId a : algos) {
      // Hierarchical needs ranks on several hosts: checked on such layouts below.
      if (a == AlgorithmId::kHierarchical) continue;
      for (size_t count : counts) {
        rep.check(label("allreduce", a, n, count, ""),
                  allReduce(w, a, count, ReduceOp::kSum, false), a, n);
      }
      const size_t c = static_cast<size_t>(n) + 1;
      rep.check(label("allreduce", a, n, c, " avg"), allReduce(w, a, c, ReduceOp::kAvg, false), a,
                n);
      rep.check(label("allreduce", a, n, c, " in place"), allReduce(w, a, c, ReduceOp::kSum, true),
                a, n);
    }
  }
  rep.print();
  std::printf("hier: refuses flat layouts (no subgroups); checked in HierarchicalEveryLayout\n");
  std::printf("%d runs in %.1f s\n", rep.runs,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// The ring all-reduce as two rings in opposite directions (used from
// Tuning::ringBidirectionalBytes on 3+ ranks; 1 here, so at every count but 0).
TEST_F(Symbolic, BidirectionalRingEveryWorldSize) {
  Report rep;
  for (int n = 2; n <= 64; ++n) {
    WorldConfig c = configFor(n);
    c.options.tuning.ringBidirectionalBytes = 1;
    VirtualWorld w(c);
    for (size_t count : countsFor(n)) {
      rep.check(label("allreduce", AlgorithmId::kRing, n, count, " bidirectional"),
                allReduce(w, AlgorithmId::kRing, count, ReduceOp::kSum, false), AlgorithmId::kRing,
                n);
    }
    const size_t c1 = static_cast<size_t>(n) + 1;
    rep.check(label("allreduce", AlgorithmId::kRing, n, c1, " bidirectional in place"),
              allReduce(w, AlgorithmId::kRing, c1, ReduceOp::kSum, true), AlgorithmId::kRing, n);
    rep.check(label("allreduce", AlgorithmId::kRing, n, c1, " bidirectional avg"),
              allReduce(w, AlgorithmId::kRing, c1, ReduceOp::kAvg, false), AlgorithmId::kRing, n);
  }
  rep.print();
}

TEST_F(Symbolic, RunPathsEveryCollectiveEveryWorldSize) {
  const auto start = std::chrono::steady_clock::now();
  Report rep;
  const Options opts;
  for (int n = 1; n <= 64; ++n) {
    VirtualWorld w(configFor(n));
    const std::vector<size_t> blockCounts = blockCountsFor(n);
    for (size_t count : countsFor(n)) {
      const bool blocks = std::count(blockCounts.begin(), blockCounts.end(), count) != 0;
      const size_t bytes = count * sizeof(SymElement);
      // As a communicator picks: from count * element size, the layout (one host here).
      auto pick = [&](CollectiveKind k, bool shared) {
        return algo::selectAlgorithm(k, bytes, n, opts, w.layered(), shared);
      };
      for (bool shared : {true, false}) {
        const AlgorithmId ar = pick(CollectiveKind::kAllReduce, shared);
        rep.check(label("run allreduce", ar, n, count, shared ? " shared" : ""),
                  allReduce(w, ar, count, ReduceOp::kAvg, false, true), ar, n);
      }
      const AlgorithmId bc = pick(CollectiveKind::kBroadcast, w.oneHost());
      for (int root : std::set<int>{0, n / 2, n - 1}) {
        rep.check(label("broadcast", bc, n, count, " root=" + std::to_string(root)),
                  broadcast(w, bc, count, root), bc, n);
      }
      if (!blocks) continue;
      const AlgorithmId rs = pick(CollectiveKind::kReduceScatter, w.oneHost());
      rep.check(label("reduce_scatter", rs, n, count, ""),
                reduceScatter(w, rs, count, ReduceOp::kSum), rs, n);
      if (count == static_cast<size_t>(n) + 1) {
        rep.check(label("reduce_scatter", rs, n, count, " avg"),
                  reduceScatter(w, rs, count, ReduceOp::kAvg), rs, n);
      }
      const AlgorithmId ag = pick(CollectiveKind::kAllGather, w.oneHost());
      rep.check(label("all_gather", ag, n, count, ""), allGather(w, ag, count, false), ag, n);
      rep.check(label("all_gather", ag, n, count, " in place"), allGather(w, ag, count, true), ag,
                n);
    }
    rep.check("barrier n=" + std::to_string(n), barrier(w), AlgorithmId::kDissemination, n);
  }
  rep.print();
  std::printf("%d runs in %.1f s\n", rep.runs,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// Every algorithm algorithmsFor lists for reduce-scatter, all-gather and broadcast, forced, for
// every world size 2..64 (a group of one only runs kNone, in RunPaths...). Halving and doubling
// run on powers of two and must decline every other size before sending anything.
TEST_F(Symbolic, OtherCollectivesEveryAlgorithmEveryWorldSize) {
  const auto start = std::chrono::steady_clock::now();
  Report rep;
  std::set<int> declined;
  for (int n = 2; n <= 64; ++n) {
    VirtualWorld w(configFor(n));
    const bool powerOfTwo = (n & (n - 1)) == 0;
    // Refusals are failures where an algorithm must run, and required where it must not (count
    // 0 runs nothing at all).
    auto check = [&](const std::string& what, Outcome o, AlgorithmId a, size_t count) {
      const bool anySize = a != AlgorithmId::kHalving && a != AlgorithmId::kDoubling;
      if (!anySize && !powerOfTwo && count > 0) {
        if (!o.refused || o.failure.find("power-of-two") == std::string::npos) {
          ADD_FAILURE() << what << ": not declined on a world size that is not a power of two"
                        << o.failure;
        }
        declined.insert(n);
        return;
      }
      o.refused = false;
      rep.check(what, o, a, n);
    };
    for (AlgorithmId a : algo::algorithmsFor(CollectiveKind::kBroadcast)) {
      std::set<int> roots{0, n / 2, n - 1};
      for (int root = 0; n <= 8 && root < n; ++root) roots.insert(root);
      for (size_t count : countsFor(n)) {
        for (int root : roots) {
          check(label("broadcast", a, n, count, " root=" + std::to_string(root)),
                broadcast(w, a, count, root), a, count);
        }
      }
    }
    for (size_t count : blockCountsFor(n)) {
      for (AlgorithmId a : algo::algorithmsFor(CollectiveKind::kReduceScatter)) {
        check(label("reduce_scatter", a, n, count, ""), reduceScatter(w, a, count, ReduceOp::kSum),
              a, count);
        if (count == static_cast<size_t>(n) + 1) {
          check(label("reduce_scatter", a, n, count, " avg"),
                reduceScatter(w, a, count, ReduceOp::kAvg), a, count);
        }
      }
      for (AlgorithmId a : algo::algorithmsFor(CollectiveKind::kAllGather)) {
        check(label("all_gather", a, n, count, ""), allGather(w, a, count, false), a, count);
        check(label("all_gather", a, n, count, " in place"), allGather(w, a, count, true), a,
              count);
      }
    }
  }
  rep.print();
  std::printf(
      "halving, doubling: declined, as they must, on the %zu world sizes in [%d..%d] that "
      "are not powers of two\n",
      declined.size(), *declined.begin(), *declined.rbegin());
  std::printf("%d runs in %.1f s\n", rep.runs,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// ---- Reduce, gather, scatter, the v-variants and all-to-all(v) ----

using Counts = std::vector<size_t>;

size_t before(const Counts& counts, int r) {
  size_t at = 0;
  for (int q = 0; q < r; ++q) at += counts[static_cast<size_t>(q)];
  return at;
}

// Runs one call of `d` on every rank: in and out of rank r, and the counts algo::Args carries.
RunResult runEach(VirtualWorld& w, const OpDesc& d, std::vector<Elements>& in,
                  std::vector<Elements>& out, const std::function<void(int, algo::Args&)>& setup) {
  return w.run([&](int r) {
    const algo::Group& g = w.group(r);
    g.tx->beginOp(d);
    algo::Args a{d, in[static_cast<size_t>(r)].data(), out[static_cast<size_t>(r)].data()};
    setup(r, a);
    algo::run(g, a);
  });
}

// Reduce to `root`: the root holds every element reduced from all ranks; the others' inputs stay.
Outcome reduceTo(VirtualWorld& w, AlgorithmId algo, size_t count, ReduceOp op, int root,
                 bool inPlace) {
  const int n = w.size();
  const auto un = static_cast<size_t>(n);
  std::vector<Elements> in(un), out(un), want(un), inWant(un);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i)
      in[static_cast<size_t>(r)].push_back(symInput(uint32_t(i), r));
    out[static_cast<size_t>(r)].assign(count, symPoison());
    inWant[static_cast<size_t>(r)] = in[static_cast<size_t>(r)];
    if (r == root) {
      for (size_t i = 0; i < count; ++i) {
        want[static_cast<size_t>(r)].push_back(
            SymElement{static_cast<uint32_t>(i), expectedFlags(op, n), symAllRanks(n)});
      }
    }
  }
  const OpDesc d =
      desc(CollectiveKind::kReduce, count, op, n == 1 ? AlgorithmId::kNone : algo, root);
  setSymbolicDivisor(n);
  RunResult res = runEach(w, d, in, out, [&](int r, algo::Args& a) {
    if (inPlace && r == root) a.out = const_cast<void*>(a.in);
  });
  if (inPlace) {
    // The root's input is its output; every other rank's input must be untouched.
    inWant[static_cast<size_t>(root)] = want[static_cast<size_t>(root)];
    return finish(res, in, inWant);
  }
  Outcome o = finish(res, out, want);
  if (o.failure.empty() && res.ok) o.failure = compare(in, inWant);
  return o;
}

// Gather (root's out: block q from rank q) and scatter (rank r's out: block r of root's in).
Outcome gatherTo(VirtualWorld& w, size_t count, int root) {
  const int n = w.size();
  const auto un = static_cast<size_t>(n);
  std::vector<Elements> in(un), out(un), want(un);
  for (int r = 0; r < n; ++r) {
    for (size_t k = 0; k < count; ++k) {
      in[static_cast<size_t>(r)].push_back(
          symInput(static_cast<uint32_t>(static_cast<size_t>(r) * count + k), r));
    }
    out[static_cast<size_t>(r)].assign(count * un, symPoison());
  }
  for (size_t i = 0; i < count * un; ++i) {
    want[static_cast<size_t>(root)].push_back(
        symInput(static_cast<uint32_t>(i), static_cast<int>(i / count)));
  }
  const OpDesc d = desc(CollectiveKind::kGather, count, ReduceOp::kSum,
                        n == 1 ? AlgorithmId::kNone : AlgorithmId::kDirect, root);
  return finish(runEach(w, d, in, out, [](int, algo::Args&) {}), out, want);
}

Outcome scatterFrom(VirtualWorld& w, size_t count, int root) {
  const int n = w.size();
  const auto un = static_cast<size_t>(n);
  std::vector<Elements> in(un), out(un), want(un);
  for (int r = 0; r < n; ++r) {
    out[static_cast<size_t>(r)].assign(count, symPoison());
    for (size_t k = 0; k < count; ++k) {
      want[static_cast<size_t>(r)].push_back(
          symInput(static_cast<uint32_t>(static_cast<size_t>(r) * count + k), root));
    }
  }
  for (size_t i = 0; i < count * un; ++i)
    in[static_cast<size_t>(root)].push_back(symInput(uint32_t(i), root));
  const OpDesc d = desc(CollectiveKind::kScatter, count, ReduceOp::kSum,
                        n == 1 ? AlgorithmId::kNone : AlgorithmId::kDirect, root);
  return finish(runEach(w, d, in, out, [](int, algo::Args&) {}), out, want);
}

// All-gather-v: element i of the output comes from the rank whose block holds i.
Outcome allGatherV(VirtualWorld& w, const Counts& counts, bool inPlace) {
  const int n = w.size();
  const auto un = static_cast<size_t>(n);
  const size_t total = before(counts, n);
  std::vector<Elements> in(un), out(un), want(un);
  for (int r = 0; r < n; ++r) {
    const size_t at = before(counts, r);
    for (size_t k = 0; k < counts[static_cast<size_t>(r)]; ++k) {
      in[static_cast<size_t>(r)].push_back(symInput(static_cast<uint32_t>(at + k), r));
    }
    out[static_cast<size_t>(r)].assign(total, symPoison());
    if (inPlace)
      std::copy(in[static_cast<size_t>(r)].begin(), in[static_cast<size_t>(r)].end(),
                out[static_cast<size_t>(r)].begin() + static_cast<long>(at));
    for (int q = 0; q < n; ++q) {
      const size_t from = before(counts, q);
      for (size_t k = 0; k < counts[static_cast<size_t>(q)]; ++k) {
        want[static_cast<size_t>(r)].push_back(symInput(static_cast<uint32_t>(from + k), q));
      }
    }
  }
  OpDesc d = OpDesc::ofCounts(CollectiveKind::kAllGatherV, counts.data(), n, kSym, ReduceOp::kSum);
  d.algo = n == 1 ? AlgorithmId::kNone : AlgorithmId::kRing;
  RunResult res = runEach(w, d, in, out, [&](int r, algo::Args& a) {
    a.counts = counts;
    if (inPlace) a.in = out[static_cast<size_t>(r)].data() + before(counts, r);
  });
  return finish(res, out, want);
}

// Reduce-scatter-v: rank r holds block r of the element-wise reduction.
Outcome reduceScatterV(VirtualWorld& w, const Counts& counts, ReduceOp op, bool inPlace) {
  const int n = w.size();
  const auto un = static_cast<size_t>(n);
  const size_t total = before(counts, n);
  std::vector<Elements> in(un), out(un), want(un);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < total; ++i)
      in[static_cast<size_t>(r)].push_back(symInput(uint32_t(i), r));
    out[static_cast<size_t>(r)].assign(counts[static_cast<size_t>(r)], symPoison());
    const size_t at = before(counts, r);
    for (size_t k = 0; k < counts[static_cast<size_t>(r)]; ++k) {
      want[static_cast<size_t>(r)].push_back(
          SymElement{static_cast<uint32_t>(at + k), expectedFlags(op, n), symAllRanks(n)});
    }
  }
  OpDesc d = OpDesc::ofCounts(CollectiveKind::kReduceScatterV, counts.data(), n, kSym, op);
  d.algo = n == 1 ? AlgorithmId::kNone : AlgorithmId::kRing;
  setSymbolicDivisor(n);
  RunResult res = runEach(w, d, in, out, [&](int r, algo::Args& a) {
    a.counts = counts;
    if (inPlace) a.out = in[static_cast<size_t>(r)].data() + before(counts, r);
  });
  if (!inPlace) return finish(res, out, want);
  std::vector<Elements> got(un);
  for (int r = 0; r < n; ++r) {
    const auto from = in[static_cast<size_t>(r)].begin() + static_cast<long>(before(counts, r));
    got[static_cast<size_t>(r)].assign(from,
                                       from + static_cast<long>(counts[static_cast<size_t>(r)]));
  }
  return finish(res, got, want);
}

// All-to-all-v (all-to-all when every count is `fixed`): sends[r][q] elements from r to q;
// element k of rank q's block from r is rank r's input element (its offset for q) + k.
Outcome allToAll(VirtualWorld& w, const std::vector<Counts>& sends, bool fixed, bool inPlace) {
  const int n = w.size();
  const auto un = static_cast<size_t>(n);
  std::vector<Elements> in(un), out(un), want(un);
  std::vector<Counts> recvs(un, Counts(un));
  for (size_t r = 0; r < un; ++r) {
    for (size_t q = 0; q < un; ++q) recvs[q][r] = sends[r][q];
  }
  for (int r = 0; r < n; ++r) {
    const auto ur = static_cast<size_t>(r);
    for (size_t i = 0; i < before(sends[ur], n); ++i) in[ur].push_back(symInput(uint32_t(i), r));
    out[ur].assign(before(recvs[ur], n), symPoison());
    for (int q = 0; q < n; ++q) {
      const size_t from = before(sends[static_cast<size_t>(q)], r);
      for (size_t k = 0; k < recvs[ur][static_cast<size_t>(q)]; ++k) {
        want[ur].push_back(symInput(static_cast<uint32_t>(from + k), q));
      }
    }
  }
  const CollectiveKind kind = fixed ? CollectiveKind::kAllToAll : CollectiveKind::kAllToAllV;
  const OpDesc d = desc(kind, fixed ? sends[0][0] : 0, ReduceOp::kSum,
                        n == 1 ? AlgorithmId::kNone : AlgorithmId::kPairwise);
  RunResult res = runEach(w, d, in, inPlace ? in : out, [&](int r, algo::Args& a) {
    if (fixed) return;
    a.counts = sends[static_cast<size_t>(r)];
    a.recvCounts = recvs[static_cast<size_t>(r)];
  });
  return finish(res, inPlace ? in : out, want);
}

// Per-rank counts for world size n: zeros among primes, one non-empty block, uneven blocks that
// span several segments.
std::vector<Counts> countListsFor(int n) {
  static const size_t primes[] = {13, 0, 1, 7, 31, 2, 0, 5, 3};
  std::vector<Counts> lists(3, Counts(static_cast<size_t>(n)));
  for (size_t r = 0; r < static_cast<size_t>(n); ++r) {
    lists[0][r] = primes[r % 9];
    lists[1][r] = r + 1 == static_cast<size_t>(n) ? 11 : 0;
    lists[2][r] = (r * 5) % 7 + 4;
  }
  return lists;
}

TEST_F(Symbolic, ReduceGatherScatterVariantsAndAllToAllEveryWorldSize) {
  const auto start = std::chrono::steady_clock::now();
  Report rep;
  for (int n = 1; n <= 64; ++n) {
    VirtualWorld w(configFor(n));
    const auto un = static_cast<size_t>(n);
    const AlgorithmId direct = n == 1 ? AlgorithmId::kNone : AlgorithmId::kDirect;
    const AlgorithmId ring = n == 1 ? AlgorithmId::kNone : AlgorithmId::kRing;
    const AlgorithmId pairwise = n == 1 ? AlgorithmId::kNone : AlgorithmId::kPairwise;
    for (size_t count : blockCountsFor(n)) {
      for (int root : std::set<int>{0, n / 2, n - 1}) {
        const std::string at = " root=" + std::to_string(root);
        for (AlgorithmId listed : algo::algorithmsFor(CollectiveKind::kReduce)) {
          const AlgorithmId a = n == 1 ? AlgorithmId::kNone : listed;
          rep.check(label("reduce", a, n, count, at),
                    reduceTo(w, a, count, ReduceOp::kSum, root, false), a, n);
          rep.check(label("reduce", a, n, count, at + " avg in place"),
                    reduceTo(w, a, count, ReduceOp::kAvg, root, true), a, n);
        }
        rep.check(label("gather", direct, n, count, at), gatherTo(w, count, root), direct, n);
        rep.check(label("scatter", direct, n, count, at), scatterFrom(w, count, root), direct, n);
      }
      const std::vector<Counts> same(un, Counts(un, count));
      rep.check(label("all_to_all", pairwise, n, count, ""), allToAll(w, same, true, false),
                pairwise, n);
      rep.check(label("all_to_all", pairwise, n, count, " in place"), allToAll(w, same, true, true),
                pairwise, n);
    }
    for (const Counts& counts : countListsFor(n)) {
      const size_t total = before(counts, n);
      rep.check(label("all_gather_v", ring, n, total, ""), allGatherV(w, counts, false), ring, n);
      rep.check(label("all_gather_v", ring, n, total, " in place"), allGatherV(w, counts, true),
                ring, n);
      rep.check(label("reduce_scatter_v", ring, n, total, ""),
                reduceScatterV(w, counts, ReduceOp::kSum, false), ring, n);
      rep.check(label("reduce_scatter_v", ring, n, total, " avg in place"),
                reduceScatterV(w, counts, ReduceOp::kAvg, true), ring, n);
      // All-to-all-v: rank r sends counts[(r + q) % n] to rank q (zeros included).
      std::vector<Counts> sends(un, Counts(un));
      for (size_t r = 0; r < un; ++r) {
        for (size_t q = 0; q < un; ++q) sends[r][q] = counts[(r + q) % un];
      }
      rep.check(label("all_to_all_v", pairwise, n, total, ""), allToAll(w, sends, false, false),
                pairwise, n);
    }
  }
  rep.print();
  std::printf("%d runs in %.1f s\n", rep.runs,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// Host layouts for world size n (host of every rank), each named.
std::vector<std::pair<std::string, std::vector<int>>> layoutsFor(int n) {
  std::vector<std::pair<std::string, std::vector<int>>> out;
  auto make = [&](const std::string& name, auto hostOf) {
    std::vector<int> h;
    for (int r = 0; r < n; ++r) h.push_back(hostOf(r));
    out.emplace_back(name, h);
  };
  // Even, hosts of consecutive ranks: the smallest and the largest proper divisor as host size.
  std::set<int> sizes;
  for (int per = 2; per < n && sizes.empty(); ++per) {
    if (n % per == 0) sizes.insert(per);
  }
  for (int per = n / 2; per >= 2; --per) {
    if (n % per == 0) {
      sizes.insert(per);
      break;
    }
  }
  for (int per : sizes) {
    make("even " + std::to_string(n / per) + "x" + std::to_string(per),
         [per](int r) { return r / per; });
  }
  if (n >= 4) make("interleaved over 2 hosts", [](int r) { return r % 2; });
  if (n >= 6) make("interleaved over 3 hosts", [](int r) { return r % 3; });
  make("uneven 1,2,2,..", [](int r) { return r == 0 ? 0 : 1 + (r - 1) / 2; });
  if (n >= 5) make("uneven n-2,1,1", [n](int r) { return r < n - 2 ? 0 : r - (n - 3); });
  return out;
}

TEST_F(Symbolic, HierarchicalEveryLayout) {
  const auto start = std::chrono::steady_clock::now();
  Report rep;
  const Options opts;
  int layouts = 0;
  for (int n = 3; n <= 64; ++n) {
    for (const auto& [name, hostOf] : layoutsFor(n)) {
      VirtualWorld w(configFor(n, hostOf));
      ASSERT_TRUE(w.layered()) << name << " n=" << n;
      ++layouts;
      for (size_t count : countsFor(n)) {
        const AlgorithmId h = AlgorithmId::kHierarchical;
        rep.check(label("allreduce", h, n, count, " " + name),
                  allReduce(w, h, count, ReduceOp::kSum, false), h, n);
      }
      const size_t c = 2 * static_cast<size_t>(n) + 3;
      const AlgorithmId h = AlgorithmId::kHierarchical;
      rep.check(label("allreduce", h, n, c, " avg " + name),
                allReduce(w, h, c, ReduceOp::kAvg, false), h, n);
      rep.check(label("allreduce", h, n, c, " in place " + name),
                allReduce(w, h, c, ReduceOp::kSum, true), h, n);
      // What run() picks on this layout, small and larger.
      for (size_t count : {size_t{5}, size_t{4000}}) {
        const AlgorithmId a = algo::selectAlgorithm(
            CollectiveKind::kAllReduce, count * sizeof(SymElement), n, opts, true, false);
        rep.check(label("run allreduce", a, n, count, " " + name),
                  allReduce(w, a, count, ReduceOp::kAvg, false, true), a, n);
      }
    }
  }
  rep.print();
  std::printf("%d layouts, %d runs in %.1f s\n", layouts, rep.runs,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// Buffers of 8 MiB and more take the pipelined path (several chunks crossing hosts while the
// hosts reduce and gather the next and previous ones).
TEST_F(Symbolic, HierarchicalPipelinedLargeBuffers) {
  Report rep;
  const size_t count = (8u << 20) / sizeof(SymElement) + 7;
  for (const auto& [n, hostOf] : std::vector<std::pair<int, std::vector<int>>>{
           {4, {0, 0, 1, 1}}, {6, {0, 1, 2, 0, 1, 2}}, {6, {0, 0, 0, 1, 1, 1}}}) {
    WorldConfig c;
    c.size = n;
    c.hostOf = hostOf;
    VirtualWorld w(c);
    const AlgorithmId h = AlgorithmId::kHierarchical;
    rep.check(label("allreduce", h, n, count, " pipelined"),
              allReduce(w, h, count, ReduceOp::kAvg, false), h, n);
  }
}

// The checker itself: an algorithm that loses or doubles one contribution is caught, and says
// which rank and element and what is wrong.
TEST_F(Symbolic, CatchesALostContribution) {
  VirtualWorld w(configFor(5));
  injectSymbolicFault(SymFault::kDrop, 3);
  const Outcome o = allReduce(w, AlgorithmId::kRing, 12, ReduceOp::kSum, false);
  injectSymbolicFault(SymFault::kNone, 0);
  EXPECT_NE(o.failure.find("missing ranks {"), std::string::npos) << o.failure;
  EXPECT_NE(o.failure.find("rank "), std::string::npos) << o.failure;
  std::printf("injected lost contribution reported as:%s\n", o.failure.c_str());
}

TEST_F(Symbolic, CatchesADuplicatedContribution) {
  VirtualWorld w(configFor(6));
  injectSymbolicFault(SymFault::kDouble, 2);
  const Outcome o = allReduce(w, AlgorithmId::kHalvingDoubling, 20, ReduceOp::kSum, false);
  injectSymbolicFault(SymFault::kNone, 0);
  EXPECT_NE(o.failure.find("counted twice"), std::string::npos) << o.failure;
  std::printf("injected duplicate reported as:%s\n", o.failure.c_str());
}

TEST_F(Symbolic, InternalTypesAreRejectedFromUsers) {
  for (DataType t : {reduce::kSymbolic, reduce::kSimBytes}) {
    OpDesc d = desc(CollectiveKind::kAllReduce, 4, ReduceOp::kSum, AlgorithmId::kRing);
    d.dtype = t;
    SymElement buf[4]{};
    try {
      validateCall(d, buf, buf, 0, 2);
      ADD_FAILURE() << "dtype " << static_cast<int>(t) << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    }
  }
}

// The algorithms size the internal types through reduce::elementSize; the public sizeOf does not
// know them.
TEST(InternalTypes, HaveSizesOnlyInside) {
  EXPECT_EQ(reduce::elementSize(reduce::kSimBytes), 1u);
  EXPECT_EQ(reduce::elementSize(reduce::kSymbolic), sizeof(SymElement));
  EXPECT_EQ(sizeOf(reduce::kSimBytes), 0u);
  EXPECT_EQ(sizeOf(reduce::kSymbolic), 0u);
  EXPECT_EQ(reduce::elementSize(DataType::kF64), 8u);
  EXPECT_EQ(reduce::elementSize(DataType::kBF16), 2u);
  EXPECT_EQ(reduce::elementSize(static_cast<DataType>(99)), 0u);
}

}  // namespace
}  // namespace chorus::sim
