// The symbolic checker: every collective algorithm, run by the real algorithm code over the
// virtual network (src/sim) on symbolic elements (sim/symbolic.h), for every world size 1..64,
// many counts, segment sizes that cut blocks into several segments, and several host layouts
// for the hierarchical all-reduce. Each output element must hold exactly the contributions its
// collective promises, once each, at the right place.
//
// This file: the all-reduce (every algorithm, the bidirectional ring, the hierarchical one on
// every layout), the checker catching injected faults, and the internal types. The other
// collectives: symbolic_collectives_test.cc and symbolic_rooted_and_v_test.cc; what they share:
// symbolic_check.h.
#include "verify/symbolic_check.h"

#include "algo/select.h"
#include "core/validate.h"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace chorus::sim::symtest {
namespace {

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
}  // namespace chorus::sim::symtest
