// RingSpec's named constructors: which buffers each collective's ring uses, and where this rank's
// block lies, against offsets summed here block by block.
#include "algo/ring.h"
#include "reduce/internal_types.h"

#include <gtest/gtest.h>

#include <vector>

namespace chorus::algo {
namespace {

// Elements before block `b` when `total` is split into n blocks, the first total % n one larger.
size_t elementsBefore(size_t total, int n, int b) {
  size_t sum = 0;
  for (int i = 0; i < b; ++i) {
    sum += total / static_cast<size_t>(n) +
           (static_cast<size_t>(i) < total % static_cast<size_t>(n) ? 1 : 0);
  }
  return sum;
}

Group groupOf(int rank, int size) {
  Group g;
  g.rank = rank;
  g.size = size;
  return g;
}

TEST(RingSpec, AllReduceOwnsTheBlockOfItsPositionEitherWayRound) {
  constexpr size_t kMaxCount = 1009;
  std::vector<uint8_t> in(kMaxCount * 16), out(kMaxCount * 16);
  for (DataType t : {DataType::kF32, DataType::kU8, reduce::kSymbolic}) {
    const size_t es = reduce::elementSize(t);
    for (int n : {1, 2, 3, 5, 8}) {
      for (size_t count : {0ul, 1ul, 7ul, kMaxCount}) {
        for (int r = 0; r < n; ++r) {
          const Group g = groupOf(r, n);
          const RingSpec f =
              RingSpec::allReduce(g, in.data(), out.data(), count, t, ReduceOp::kMax);
          EXPECT_EQ(f.in, in.data());
          EXPECT_EQ(f.acc, out.data());
          EXPECT_EQ(f.own - f.acc, static_cast<long>(elementsBefore(count, n, r) * es));
          EXPECT_EQ(f.totalCount, count);
          EXPECT_EQ(f.blockCount, 0u);
          EXPECT_EQ(f.op, ReduceOp::kMax);
          EXPECT_TRUE(f.reduce && f.gather && !f.reverse);

          const RingSpec b = RingSpec::allReduce(g, in.data(), out.data(), count, t, ReduceOp::kSum,
                                                 RingDirection::kBackward);
          EXPECT_TRUE(b.reverse);
          const int position = (n - r) % n;  // rank r's place on the reversed ring
          EXPECT_EQ(b.own - b.acc, static_cast<long>(elementsBefore(count, n, position) * es));
        }
      }
    }
  }
}

TEST(RingSpec, ReduceScatterAndAllGatherRunOnePhaseEach) {
  std::vector<uint8_t> in(2048), out(2048), partials(2048), own(64);
  for (int n : {1, 2, 3, 5, 8}) {
    for (size_t count : {0ul, 1ul, 13ul}) {
      for (int r = 0; r < n; ++r) {
        const Group g = groupOf(r, n);
        const RingSpec rs = RingSpec::reduceScatter(g, in.data(), out.data(), count, DataType::kF64,
                                                    ReduceOp::kSum);
        EXPECT_TRUE(rs.reduce && !rs.gather);
        EXPECT_EQ(rs.own - rs.acc, static_cast<long>(elementsBefore(count, n, r) * 8));

        const RingSpec ag = RingSpec::allGather(g, out.data(), count, DataType::kF64);
        EXPECT_TRUE(!ag.reduce && ag.gather);
        EXPECT_EQ(ag.in, nullptr);
        EXPECT_EQ(ag.own - ag.acc, static_cast<long>(elementsBefore(count, n, r) * 8));

        // Equal blocks: the reduced block goes wherever the caller says; gathered ones in order.
        const RingSpec rsb = RingSpec::reduceScatterBlocks(
            g, in.data(), partials.data(), own.data(), count, DataType::kI32, ReduceOp::kMin);
        EXPECT_TRUE(rsb.reduce && !rsb.gather);
        EXPECT_EQ(rsb.acc, partials.data());
        EXPECT_EQ(rsb.own, own.data());
        EXPECT_EQ(rsb.blockCount, count);
        EXPECT_EQ(rsb.totalCount, count * static_cast<size_t>(n));

        const RingSpec agb = RingSpec::allGatherBlocks(g, out.data(), count, DataType::kI32);
        EXPECT_TRUE(!agb.reduce && agb.gather);
        EXPECT_EQ(agb.own - agb.acc, static_cast<long>(count * 4 * static_cast<size_t>(r)));
        EXPECT_EQ(agb.totalCount, count * static_cast<size_t>(n));
      }
    }
  }
}

}  // namespace
}  // namespace chorus::algo
