// The symbolic checker (symbolic_test.cc says how it works) on reduce, gather, scatter, the
// v-variants and all-to-all(v), for every world size 1..64.
#include "verify/symbolic_check.h"

#include "algo/select.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace chorus::sim::symtest {
namespace {

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

}  // namespace
}  // namespace chorus::sim::symtest
