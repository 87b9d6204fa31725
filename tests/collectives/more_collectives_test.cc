// Reduce, gather, scatter, all-gather-v, reduce-scatter-v, all-to-all and all-to-all-v over
// thread-ranks, for every dtype (and op where one applies), awkward counts and per-rank counts
// with zeros, in place and not, checked against results computed here from the inputs.
#include "collectives/reference.h"
#include "harness/thread_ranks.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace chorus::testing {
namespace {

// Per-rank counts: all zero, zeros between primes, a single non-empty block, large and uneven.
std::vector<std::vector<size_t>> countPatterns(int n) {
  static const size_t primes[] = {13, 0, 1, 7, 31, 2, 0, 5};
  std::vector<std::vector<size_t>> all(4, std::vector<size_t>(static_cast<size_t>(n)));
  for (int r = 0; r < n; ++r) {
    const auto i = static_cast<size_t>(r);
    all[0][i] = 0;
    all[1][i] = primes[i % 8];
    all[2][i] = r == n - 1 ? 1031 : 0;
    all[3][i] = 1031 + 97 * i;
  }
  return all;
}

std::string label(const std::string& what, DataType t, size_t count, bool inPlace) {
  return what + " " + std::string(toString(t)) + " count=" + std::to_string(count) +
         (inPlace ? " in-place" : "");
}

void check(const std::string& what, int rank, const uint8_t* got, const Buffer& want, size_t es) {
  long i = firstDifference(got, want.data(), want.size() / es, es);
  if (i >= 0) {
    throw std::runtime_error(what + ": rank " + std::to_string(rank) + " element " +
                             std::to_string(i) + " differs from the reference");
  }
}

Buffer concat(const std::vector<Buffer>& parts) {
  Buffer all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

size_t sum(const std::vector<size_t>& v) { return std::accumulate(v.begin(), v.end(), size_t{0}); }

class MoreCollectives : public ::testing::TestWithParam<int> {};

// Under each reduce algorithm, forced (automatic choice takes ring_gather only for large buffers).
TEST_P(MoreCollectives, ReduceToEveryKindOfRoot) {
  const int n = GetParam();
  for (const char* algo : {"reduce=binomial", "reduce=ring_gather"}) {
    SCOPED_TRACE(algo);
    Options o = testOptions();
    o.algorithm = parseAlgorithmSetting(algo);
    expectRanks(
        n,
        [n](Communicator& c) {
          const int me = c.rank();
          int turn = 0;
          for (DataType t : kTypes) {
            const size_t es = sizeOf(t);
            for (ReduceOp op : kOps) {
              for (size_t count : smallCounts(n)) {
                const int root = static_cast<int>((count + static_cast<size_t>(turn)) % n);
                const bool inPlace = ++turn % 2 == 0;
                const std::string what =
                    label("reduce " + std::string(toString(op)) + " root=" + std::to_string(root),
                          t, count, inPlace);
                std::vector<Buffer> inputs;
                for (int r = 0; r < n; ++r) inputs.push_back(makeInput(t, op, r, count));
                Buffer in = inputs[static_cast<size_t>(me)];
                if (me != root) {
                  c.reduce(in.data(), nullptr, count, t, op, root).wait();
                  check(what + " (input kept)", me, in.data(), inputs[static_cast<size_t>(me)], es);
                  continue;
                }
                const Buffer want = reduceReference(t, op, inputs, count);
                if (inPlace) {
                  c.reduce(in.data(), in.data(), count, t, op, root).wait();
                  check(what, me, in.data(), want, es);
                } else {
                  Buffer out(in.size(), 0xAB);
                  c.reduce(in.data(), out.data(), count, t, op, root).wait();
                  check(what, me, out.data(), want, es);
                }
              }
            }
          }
        },
        o);
  }
}

TEST_P(MoreCollectives, GatherAndScatterEveryTypeAndCount) {
  const int n = GetParam();
  expectRanks(n, [n](Communicator& c) {
    const int me = c.rank();
    int turn = 0;
    for (DataType t : kTypes) {
      const size_t es = sizeOf(t);
      for (size_t count : smallCounts(n)) {
        const int root = static_cast<int>((count + static_cast<size_t>(turn)) % n);
        const bool inPlace = ++turn % 2 == 0;
        const size_t bytes = count * es;
        std::vector<Buffer> blocks;
        for (int r = 0; r < n; ++r) blocks.push_back(makeInput(t, ReduceOp::kSum, r, count, 7));
        const Buffer all = concat(blocks);
        const Buffer& mine = blocks[static_cast<size_t>(me)];
        const size_t at = bytes * static_cast<size_t>(me);

        const std::string g = label("gather root=" + std::to_string(root), t, count, inPlace);
        if (me != root) {
          c.gather(mine.data(), nullptr, count, t, root).wait();
        } else {
          Buffer out(all.size(), 0xAB);
          if (inPlace && bytes != 0) std::memcpy(out.data() + at, mine.data(), bytes);
          c.gather(inPlace ? out.data() + at : mine.data(), out.data(), count, t, root).wait();
          check(g, me, out.data(), all, es);
        }

        const std::string s = label("scatter root=" + std::to_string(root), t, count, inPlace);
        if (me != root) {
          Buffer out(bytes, 0xAB);
          c.scatter(nullptr, out.data(), count, t, root).wait();
          check(s, me, out.data(), mine, es);
        } else {
          Buffer in = all;
          if (inPlace) {
            c.scatter(in.data(), in.data() + at, count, t, root).wait();
            check(s, me, in.data(), all, es);  // its own block stays where it was
          } else {
            Buffer out(bytes, 0xAB);
            c.scatter(in.data(), out.data(), count, t, root).wait();
            check(s, me, out.data(), mine, es);
            check(s + " (input kept)", me, in.data(), all, es);
          }
        }
      }
    }
  });
}

TEST_P(MoreCollectives, AllGatherVWithZerosAndPrimes) {
  const int n = GetParam();
  expectRanks(n, [n](Communicator& c) {
    const int me = c.rank();
    int turn = 0;
    for (DataType t : kTypes) {
      const size_t es = sizeOf(t);
      for (const auto& counts : countPatterns(n)) {
        const bool inPlace = ++turn % 2 == 0;
        std::vector<Buffer> blocks;
        for (int r = 0; r < n; ++r) {
          blocks.push_back(makeInput(t, ReduceOp::kSum, r, counts[static_cast<size_t>(r)], 11));
        }
        const Buffer want = concat(blocks);
        const Buffer& mine = blocks[static_cast<size_t>(me)];
        const std::string what = label("all_gather_v", t, sum(counts), inPlace);
        Buffer out(want.size(), 0xAB);
        if (inPlace) {
          const size_t at = es * std::accumulate(counts.begin(), counts.begin() + me, size_t{0});
          if (!mine.empty()) std::memcpy(out.data() + at, mine.data(), mine.size());
          c.allGatherV(out.data() + at, out.data(), counts.data(), t).wait();
        } else {
          c.allGatherV(mine.data(), out.data(), counts.data(), t).wait();
        }
        check(what, me, out.data(), want, es);
      }
    }
  });
}

TEST_P(MoreCollectives, ReduceScatterVWithZerosAndPrimes) {
  const int n = GetParam();
  expectRanks(n, [n](Communicator& c) {
    const int me = c.rank();
    int turn = 0;
    for (DataType t : kTypes) {
      const size_t es = sizeOf(t);
      for (ReduceOp op : kOps) {
        for (const auto& counts : countPatterns(n)) {
          const bool inPlace = ++turn % 2 == 0;
          const size_t total = sum(counts);
          std::vector<Buffer> inputs;
          for (int r = 0; r < n; ++r) inputs.push_back(makeInput(t, op, r, total, 13));
          const Buffer full = reduceReference(t, op, inputs, total);
          const size_t at = es * std::accumulate(counts.begin(), counts.begin() + me, size_t{0});
          const size_t mineBytes = counts[static_cast<size_t>(me)] * es;
          const Buffer want(full.begin() + static_cast<long>(at),
                            full.begin() + static_cast<long>(at + mineBytes));
          const std::string what =
              label("reduce_scatter_v " + std::string(toString(op)), t, total, inPlace);
          Buffer in = inputs[static_cast<size_t>(me)];
          if (inPlace) {
            c.reduceScatterV(in.data(), in.data() + at, counts.data(), t, op).wait();
            check(what, me, in.data() + at, want, es);
          } else {
            Buffer out(mineBytes, 0xAB);
            c.reduceScatterV(in.data(), out.data(), counts.data(), t, op).wait();
            check(what, me, out.data(), want, es);
          }
        }
      }
    }
  });
}

TEST_P(MoreCollectives, AllToAllEveryTypeAndCount) {
  const int n = GetParam();
  expectRanks(n, [n](Communicator& c) {
    const int me = c.rank();
    const auto nn = static_cast<size_t>(n);
    int turn = 0;
    for (DataType t : kTypes) {
      const size_t es = sizeOf(t);
      for (size_t count : smallCounts(n)) {
        const bool inPlace = ++turn % 2 == 0;
        const size_t bytes = count * es;
        std::vector<Buffer> inputs;  // rank r's send buffer: block q goes to rank q
        for (int r = 0; r < n; ++r)
          inputs.push_back(makeInput(t, ReduceOp::kSum, r, nn * count, 17));
        Buffer want(nn * bytes);
        for (size_t q = 0; q < nn && bytes != 0; ++q) {
          std::memcpy(want.data() + q * bytes, inputs[q].data() + static_cast<size_t>(me) * bytes,
                      bytes);
        }
        const std::string what = label("all_to_all", t, count, inPlace);
        Buffer in = inputs[static_cast<size_t>(me)];
        if (inPlace) {
          c.allToAll(in.data(), in.data(), count, t).wait();
          check(what, me, in.data(), want, es);
        } else {
          Buffer out(in.size(), 0xAB);
          c.allToAll(in.data(), out.data(), count, t).wait();
          check(what, me, out.data(), want, es);
        }
      }
    }
  });
}

// What rank `from` sends rank `to` in all-to-all-v pattern p (zeros included).
size_t pairCount(int p, int from, int to) {
  switch (p) {
    case 0:
      return 0;
    case 1:
      return (from * 3 + to * 5) % 4 == 0 ? 0 : static_cast<size_t>(from + 2 * to) % 11;
    default:
      return from == to ? 0 : static_cast<size_t>(97 * (from + 1) + to);
  }
}

TEST_P(MoreCollectives, AllToAllVWithZeros) {
  const int n = GetParam();
  expectRanks(n, [n](Communicator& c) {
    const int me = c.rank();
    for (DataType t : kTypes) {
      const size_t es = sizeOf(t);
      for (int p = 0; p < 3; ++p) {
        // Rank r's send buffer: the blocks for ranks 0..n-1 one after another.
        std::vector<Buffer> inputs;
        std::vector<std::vector<size_t>> sends(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) {
          for (int q = 0; q < n; ++q) sends[static_cast<size_t>(r)].push_back(pairCount(p, r, q));
          inputs.push_back(makeInput(t, ReduceOp::kSum, r, sum(sends[static_cast<size_t>(r)]), 19));
        }
        std::vector<size_t> recvs;
        Buffer want;
        for (int q = 0; q < n; ++q) {
          const auto& theirs = sends[static_cast<size_t>(q)];
          const size_t at = es * std::accumulate(theirs.begin(), theirs.begin() + me, size_t{0});
          const size_t len = es * theirs[static_cast<size_t>(me)];
          recvs.push_back(theirs[static_cast<size_t>(me)]);
          const uint8_t* from = inputs[static_cast<size_t>(q)].data() + at;
          want.insert(want.end(), from, from + len);
        }
        Buffer out(want.size(), 0xAB);
        const Buffer& in = inputs[static_cast<size_t>(me)];
        c.allToAllV(in.data(), sends[static_cast<size_t>(me)].data(), out.data(), recvs.data(), t)
            .wait();
        check(label("all_to_all_v pattern " + std::to_string(p), t, want.size() / es, false), me,
              out.data(), want, es);
      }
    }
  });
}

// Several calls in flight at once complete in order with the right data, and the counts arrays
// may change as soon as a call returns its Work.
TEST_P(MoreCollectives, NonBlockingCallsOverlap) {
  const int n = GetParam();
  expectRanks(n, [n](Communicator& c) {
    const int me = c.rank();
    const auto nn = static_cast<size_t>(n);
    std::vector<int32_t> x(5, me + 1), reduced(5, -1);
    std::vector<int32_t> gathered(5 * nn, -1);
    std::vector<size_t> counts(nn);
    for (size_t r = 0; r < nn; ++r) counts[r] = r % 2 == 0 ? r + 1 : 0;
    std::vector<int32_t> mine(counts[static_cast<size_t>(me)], me);
    std::vector<int32_t> all(sum(counts), -1);
    std::vector<int32_t> spread(nn * 2), back(nn * 2, -1);
    for (size_t i = 0; i < spread.size(); ++i) spread[i] = me * 100 + static_cast<int>(i);

    Work w1 = c.reduce(std::span<const int32_t>(x), std::span<int32_t>(reduced), n - 1);
    Work w2 = c.gather(std::span<const int32_t>(x), std::span<int32_t>(gathered), 0);
    Work w3 = c.allGatherV(std::span<const int32_t>(mine), std::span<int32_t>(all),
                           std::span<const size_t>(counts));
    std::fill(counts.begin(), counts.end(), 12345);  // the call copied them
    Work w4 = c.allToAll(std::span<const int32_t>(spread), std::span<int32_t>(back));
    w4.wait();
    w1.wait();
    w2.wait();
    w3.wait();
    if (me == n - 1) {
      EXPECT_EQ(reduced, std::vector<int32_t>(5, n * (n + 1) / 2));
    }
    if (me == 0) {
      for (size_t i = 0; i < gathered.size(); ++i) EXPECT_EQ(gathered[i], int(i / 5) + 1);
    }
    size_t at = 0;
    for (size_t r = 0; r < nn; ++r) {
      for (size_t k = 0; k < (r % 2 == 0 ? r + 1 : 0); ++k) EXPECT_EQ(all[at++], int(r));
    }
    for (size_t q = 0; q < nn; ++q) {
      for (size_t k = 0; k < 2; ++k) {
        EXPECT_EQ(back[q * 2 + k], int(q) * 100 + me * 2 + int(k));
      }
    }
  });
}

TEST_P(MoreCollectives, TypedFormsCheckSizes) {
  const int n = GetParam();
  expectRanks(n, [n](Communicator& c) {
    std::vector<float> in(3), out(3 * static_cast<size_t>(n) + 1);
    std::vector<size_t> shortCounts(static_cast<size_t>(n) + 1, 1);
    EXPECT_THROW(c.gather(std::span<const float>(in), std::span<float>(out), c.rank()).wait(),
                 Error);
    EXPECT_THROW(c.allGatherV(std::span<const float>(in), std::span<float>(out),
                              std::span<const size_t>(shortCounts)),
                 Error);
    EXPECT_THROW(c.reduce(in.data(), out.data(), 3, DataType::kF32, ReduceOp::kSum, n), Error);
    EXPECT_THROW(c.allGatherV(in.data(), out.data(), nullptr, DataType::kF32), Error);
    // Nothing was sent: a correct call still works.
    std::vector<float> all(3 * static_cast<size_t>(n));
    c.gather(std::span<const float>(in), std::span<float>(all), 0).wait();
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, MoreCollectives, ::testing::Values(1, 2, 3, 5, 8),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return "n" + std::to_string(param.param);
                         });

}  // namespace
}  // namespace chorus::testing
