// The symbolic checker (symbolic_test.cc says how it works) on reduce-scatter, all-gather,
// broadcast and barrier: the algorithm a communicator would pick through algo::run, and every
// algorithm listed for each collective, forced, for every world size.
#include "verify/symbolic_check.h"

#include "algo/select.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

namespace chorus::sim::symtest {
namespace {

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

}  // namespace
}  // namespace chorus::sim::symtest
