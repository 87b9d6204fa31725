// What the symbolic checker's tests share (symbolic_test.cc, symbolic_collectives_test.cc,
// symbolic_rooted_and_v_test.cc): the fixture, the all-reduce run, the counts and world sizes,
// and the report that tells a declined case from a wrong one.
#pragma once

#include "algo/collectives.h"
#include "reduce/internal_types.h"
#include "sim/symbolic.h"
#include "sim/virtual_world.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace chorus::sim::symtest {

using Elements = std::vector<SymElement>;
inline constexpr DataType kSym = reduce::kSymbolic;

class Symbolic : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { installSymbolicKernels(); }
};

// The algorithms that must accept every world size >= 2 (on a layered layout for kHierarchical).
inline bool mustAccept(AlgorithmId id) {
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

inline std::string label(const char* what, AlgorithmId algo, int n, size_t count,
                         const std::string& extra) {
  return std::string(what) + "[" + toString(algo) + "] n=" + std::to_string(n) +
         " count=" + std::to_string(count) + extra;
}

// Compares got with want for every rank; "" when all match, else the first few differences.
inline std::string compare(const std::vector<Elements>& got, const std::vector<Elements>& want) {
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

inline Outcome finish(const RunResult& res, const std::vector<Elements>& got,
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

inline uint32_t expectedFlags(ReduceOp op, int n) {
  return op == ReduceOp::kAvg && n > 1 ? static_cast<uint32_t>(kSymDivided) : 0u;
}

inline OpDesc desc(CollectiveKind kind, size_t count, ReduceOp op, AlgorithmId algo, int root = 0) {
  OpDesc d = OpDesc::of(kind, count, kSym, op, root);
  d.algo = algo;
  return d;
}

// All-reduce with a given algorithm (viaRun: through algo::run with the selected algorithm).
inline Outcome allReduce(VirtualWorld& w, AlgorithmId algo, size_t count, ReduceOp op, bool inPlace,
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

// Counts for world size n: the edges around n, primes, counts not divisible by n, and counts
// that give every block several segments of kSegmentElems.
inline std::vector<size_t> countsFor(int n) {
  const auto un = static_cast<size_t>(n);
  std::set<size_t> c{0, 1, 2, un - 1, un, un + 1, 7, 31, 2 * un + 3, 7 * un + 5};
  if (n <= 16) c.insert({13, 3 * un - 1, 97});
  return {c.begin(), c.end()};
}

// Counts per block (reduce-scatter, all-gather: the buffers hold n blocks): a block of 4 or more
// elements already spans several segments.
inline std::vector<size_t> blockCountsFor(int n) {
  const auto un = static_cast<size_t>(n);
  std::set<size_t> c{0, 1, 2, 7, un + 1};
  if (n <= 16) c.insert({13, un - 1, 2 * un + 3});
  return {c.begin(), c.end()};
}

// Small segments: blocks of a few elements cut into several.
inline constexpr size_t kSegmentElems = 3;

inline WorldConfig configFor(int n, std::vector<int> hostOf = {}) {
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

}  // namespace chorus::sim::symtest
