// Communicator::split and chorus_comm_split over thread-ranks: membership and order of the new
// communicators, collectives on them checked against an independent reference, nesting, use
// alongside the parent, and failures that end in an error naming the split instead of a hang.
#include "collectives/reference.h"
#include "harness/c_ranks.h"
#include "harness/thread_ranks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

namespace chorus::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// (color, key) of `rank` in a world of `size`.
using Spec = std::function<std::pair<int, int>(int rank, int size)>;

// The ranks (of the communicator that splits) of `rank`'s new communicator, in new-rank order:
// ordered by (key, old rank). Empty for a negative color. Written without the library.
std::vector<int> expectedMembers(int size, int rank, const Spec& spec) {
  const int color = spec(rank, size).first;
  if (color < 0) return {};
  std::vector<std::pair<int, int>> m;
  for (int q = 0; q < size; ++q) {
    auto [c, k] = spec(q, size);
    if (c == color) m.emplace_back(k, q);
  }
  std::sort(m.begin(), m.end());
  std::vector<int> out;
  for (auto& p : m) out.push_back(p.second);
  return out;
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// Splits `parent` by `spec` and checks the result's size and rank. ids[i] names rank i of parent
// (its world rank); returns the child and, in childIds, the world rank of each child rank.
std::unique_ptr<Communicator> splitChecked(Communicator& parent, const std::vector<int>& ids,
                                           const Spec& spec, std::vector<int>* childIds) {
  auto [color, key] = spec(parent.rank(), parent.size());
  std::vector<int> members = expectedMembers(parent.size(), parent.rank(), spec);
  auto child = parent.split(color, key);
  const std::string who = "world rank " + std::to_string(ids[static_cast<size_t>(parent.rank())]) +
                          " color " + std::to_string(color);
  if (color < 0) {
    require(child == nullptr, who + ": negative color returned a communicator");
    childIds->clear();
    return child;
  }
  require(child != nullptr, who + ": split returned nullptr");
  require(child->size() == static_cast<int>(members.size()),
          who + ": size " + std::to_string(child->size()) + ", expected " +
              std::to_string(members.size()));
  const auto me = std::find(members.begin(), members.end(), parent.rank()) - members.begin();
  require(child->rank() == me,
          who + ": rank " + std::to_string(child->rank()) + ", expected " + std::to_string(me));
  require(child->options().timeout == parent.options().timeout &&
              child->options().algorithm == parent.options().algorithm &&
              child->options().segmentBytes == parent.options().segmentBytes,
          who + ": options not inherited");
  childIds->clear();
  for (int m : members) childIds->push_back(ids[static_cast<size_t>(m)]);
  return child;
}

void check(const std::string& what, const Buffer& got, const Buffer& want, size_t es) {
  require(got.size() == want.size(), what + ": size differs");
  long i = firstDifference(got.data(), want.data(), got.size() / es, es);
  require(i < 0, what + ": element " + std::to_string(i) + " differs from the reference");
}

// All-reduce, all-gather and broadcast on c, whose rank i is world rank ids[i]. Inputs depend
// on the world rank, so a wrong membership or order shows up as wrong data.
void exercise(Communicator& c, const std::vector<int>& ids, uint32_t salt) {
  require(c.size() == static_cast<int>(ids.size()), "exercise: size differs");
  const int r = c.rank();
  const int me = ids[static_cast<size_t>(r)];
  const std::string where = "world rank " + std::to_string(me) + " (rank " + std::to_string(r) +
                            " of " + std::to_string(c.size()) + ")";
  const std::pair<DataType, ReduceOp> reductions[] = {{DataType::kF32, ReduceOp::kSum},
                                                      {DataType::kI64, ReduceOp::kMax},
                                                      {DataType::kBF16, ReduceOp::kAvg}};
  for (size_t count : {size_t{0}, size_t{1}, size_t{1031}}) {
    const std::string n = " count=" + std::to_string(count) + " " + where;
    for (auto [t, op] : reductions) {
      std::vector<Buffer> inputs;
      for (int id : ids) inputs.push_back(makeInput(t, op, id, count, salt));
      Buffer buf = makeInput(t, op, me, count, salt);
      c.allReduce(buf.data(), buf.data(), count, t, op).wait();
      check("allreduce " + std::string(toString(t)) + n, buf, reduceReference(t, op, inputs, count),
            sizeOf(t));
    }
    Buffer want;
    for (int id : ids) {
      Buffer b = makeInput(DataType::kI32, ReduceOp::kSum, id, count, salt + 1);
      want.insert(want.end(), b.begin(), b.end());
    }
    Buffer in = makeInput(DataType::kI32, ReduceOp::kSum, me, count, salt + 1);
    Buffer out(want.size(), 0xEE);
    c.allGather(in.data(), out.data(), count, DataType::kI32).wait();
    check("all_gather" + n, out, want, 4);
    for (int root = 0; root < c.size(); ++root) {
      Buffer value = makeInput(DataType::kF16, ReduceOp::kSum, ids[static_cast<size_t>(root)],
                               count, salt + 2);
      Buffer b = r == root ? value : Buffer(value.size(), 0x5A);
      c.broadcast(b.data(), count, DataType::kF16, root).wait();
      check("broadcast root " + std::to_string(root) + n, b, value, 2);
    }
  }
}

std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

// Splits the world by spec, exercises the child (if any), then the world again.
void splitAndUse(int n, const Spec& spec) {
  expectRanks(n, [&](Communicator& world) {
    std::vector<int> ids;
    auto child = splitChecked(world, iota(n), spec, &ids);
    if (child) exercise(*child, ids, 1);
    exercise(world, iota(n), 2);
  });
}

class Split : public ::testing::TestWithParam<int> {
 protected:
  int size() const { return GetParam(); }
};

TEST_P(Split, EvenOdd) {
  splitAndUse(size(), [](int r, int) { return std::pair{r % 2, r}; });
}

TEST_P(Split, KeyReversesOrder) {
  splitAndUse(size(), [](int r, int) { return std::pair{0, -r}; });
}

TEST_P(Split, KeyOrdersBeforeRankAndTiesKeepRankOrder) {
  // Keys 2,2,1,1,0,0,...: pairs swap places, ties keep their old order.
  splitAndUse(size(), [](int r, int) { return std::pair{3, 10 - r / 2}; });
}

TEST_P(Split, AllRanksOneColor) {
  splitAndUse(size(), [](int, int) { return std::pair{7, 0}; });
}

TEST_P(Split, EveryRankItsOwnColor) {
  splitAndUse(size(), [](int r, int) { return std::pair{r, 0}; });
}

TEST_P(Split, NegativeColorJoinsNothing) {
  // Every third rank opts out (kNoColor or another negative value); the rest split even/odd.
  splitAndUse(size(), [](int r, int) {
    if (r % 3 == 1) return std::pair{r % 2 ? kNoColor : -5, 0};
    return std::pair{r % 2, r};
  });
}

TEST_P(Split, EveryRankNegative) {
  splitAndUse(size(), [](int, int) { return std::pair{kNoColor, 0}; });
}

TEST_P(Split, NestedSplits) {
  const int n = size();
  expectRanks(n, [&](Communicator& world) {
    std::vector<int> childIds, grandIds;
    // Halves reversed, then each half split again: sibling communicators split concurrently
    // with the same split number and colors, so only their own key scopes keep them apart.
    auto child = splitChecked(
        world, iota(n),
        [](int r, int) {
          return std::pair{r % 2, -r};
        },
        &childIds);
    auto grand = splitChecked(
        *child, childIds,
        [](int r, int s) {
          return std::pair{r < (s + 1) / 2 ? 0 : 1, r};
        },
        &grandIds);
    exercise(*grand, grandIds, 3);
    std::vector<int> greatIds;
    auto great = splitChecked(
        *grand, grandIds,
        [](int r, int) {
          return std::pair{0, -r};
        },
        &greatIds);
    exercise(*great, greatIds, 4);
    exercise(*child, childIds, 5);
    exercise(world, iota(n), 6);
    // Destroying the parent first leaves the children working.
    child.reset();
    exercise(*grand, grandIds, 7);
  });
}

TEST_P(Split, ParentAndChildrenAlternate) {
  const int n = size();
  expectRanks(n, [&](Communicator& world) {
    std::vector<int> aIds, bIds;
    auto a = splitChecked(
        world, iota(n),
        [](int r, int) {
          return std::pair{r % 2, r};
        },
        &aIds);
    // A second split of the same parent while the first child lives: fresh keys, no confusion.
    auto b = splitChecked(
        world, iota(n),
        [](int r, int) {
          return std::pair{r < 2 ? 0 : 1, -r};
        },
        &bIds);
    for (int round = 0; round < 3; ++round) {
      const uint32_t salt = 10 + 3 * static_cast<uint32_t>(round);
      float x = static_cast<float>(world.rank() + 1);
      world.allReduce(std::span<float>(&x, 1)).wait();
      require(x == static_cast<float>(n * (n + 1) / 2), "world allreduce between child calls");
      exercise(*a, aIds, salt);
      exercise(world, iota(n), salt + 1);
      exercise(*b, bIds, salt + 2);
    }
    // Operations in flight on parent and child at once (each has its own worker and sockets).
    std::vector<int32_t> w(1000, world.rank() + 1), c(1000, a->rank() + 1);
    Work ww = world.allReduce(std::span<int32_t>(w));
    Work cw = a->allReduce(std::span<int32_t>(c));
    cw.wait();
    ww.wait();
    const int m = a->size();
    require(w[999] == n * (n + 1) / 2 && c[0] == m * (m + 1) / 2, "overlapped allreduce");
  });
}

// split with options of its own: the child runs with them, the parent keeps its own.
TEST_P(Split, WithOptionsOfItsOwn) {
  const int n = size();
  expectRanks(n, [&](Communicator& world) {
    Options o = world.options();
    o.algorithm = parseAlgorithmSetting("tree");
    o.segmentBytes = 8192;
    auto child = world.split(0, world.rank(), o);
    require(child != nullptr && child->size() == n, "split with options: membership");
    require(child->options().algorithm == o.algorithm && child->options().segmentBytes == 8192,
            "split with options: the child's options");
    require(world.options().algorithm != o.algorithm, "split with options: the parent's changed");
    std::vector<float> v(5000, static_cast<float>(child->rank() + 1));
    child->allReduce(std::span<float>(v)).wait();
    require(v[4999] == static_cast<float>(n * (n + 1) / 2), "split with options: allreduce");
    require(n == 1 || child->lastAlgorithm() == "tree",
            "split with options: ran " + child->lastAlgorithm());
    exercise(world, iota(n), 3);
  });
}

INSTANTIATE_TEST_SUITE_P(, Split, ::testing::Values(1, 2, 3, 5, 8),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "n" + std::to_string(i.param);
                         });

// ---- failures ----

struct Outcome {
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  double seconds = 0;
};

// A rank that never calls split: the others fail with a timeout naming the split, not a hang.
TEST(SplitFailures, RankThatNeverCallsSplitTimesOut) {
  const int n = 3, absent = 2;
  std::vector<Outcome> out(n);
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  auto errors = runRanks(
      n,
      [&](Communicator& c) {
        if (c.rank() == absent) {
          // Stays alive (connections open) without calling split until the others gave up.
          std::unique_lock<std::mutex> lock(mu);
          cv.wait_for(lock, seconds(20), [&] { return finished == n - 1; });
          return;
        }
        Outcome& me = out[static_cast<size_t>(c.rank())];
        auto t0 = std::chrono::steady_clock::now();
        try {
          c.split(0, 0);
        } catch (const Error& e) {
          me.code = e.code();
          me.message = e.what();
        }
        me.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::lock_guard<std::mutex> lock(mu);
        ++finished;
        cv.notify_all();
      },
      testOptions(milliseconds(1500)));
  for (auto& e : errors) ADD_FAILURE() << e;
  for (int r = 0; r < n; ++r) {
    if (r == absent) continue;
    const Outcome& o = out[static_cast<size_t>(r)];
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + o.message);
    EXPECT_EQ(o.code, ErrorCode::kTimeout);
    EXPECT_NE(o.message.find("split #0 (rank " + std::to_string(r)), std::string::npos);
    EXPECT_NE(o.message.find("rank " + std::to_string(absent)), std::string::npos);
    EXPECT_LT(o.seconds, 10.0);
  }
}

// A rank that leaves instead of splitting: the others get an error naming the split.
TEST(SplitFailures, RankThatLeavesFailsTheOthers) {
  const int n = 3;
  std::vector<Outcome> out(n);
  auto errors = runRanks(
      n,
      [&](Communicator& c) {
        if (c.rank() == 1) return;  // destroys its communicator
        Outcome& me = out[static_cast<size_t>(c.rank())];
        try {
          c.split(0, c.rank());
        } catch (const Error& e) {
          me.code = e.code();
          me.message = e.what();
        }
      },
      testOptions(seconds(5)));
  for (auto& e : errors) ADD_FAILURE() << e;
  for (int r : {0, 2}) {
    const Outcome& o = out[static_cast<size_t>(r)];
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + o.message);
    EXPECT_EQ(o.code, ErrorCode::kPeerFailure);
    EXPECT_NE(o.message.find("split #0 (rank " + std::to_string(r)), std::string::npos);
  }
}

// A rank that runs an all-gather of the same shape instead of split: a mismatch on the ranks that
// split, and the parent is aborted, so the odd rank fails too (in that all-gather or the next
// call).
TEST(SplitFailures, AllGatherInsteadOfSplitIsAMismatch) {
  const int n = 3;
  std::vector<Outcome> out(n), later(n);
  auto errors = runRanks(
      n,
      [&](Communicator& c) {
        Outcome& me = out[static_cast<size_t>(c.rank())];
        try {
          if (c.rank() == 2) {
            int64_t mine[4] = {1, 2, 3, 4}, all[12];
            c.allGather(mine, all, 4, DataType::kI64).wait();
          } else {
            c.split(0, 0);
          }
        } catch (const Error& e) {
          me.code = e.code();
          me.message = e.what();
        }
        try {
          float x = 1;
          c.allReduce(std::span<float>(&x, 1)).wait();
        } catch (const Error& e) {
          later[static_cast<size_t>(c.rank())].code = e.code();
          later[static_cast<size_t>(c.rank())].message = e.what();
        }
      },
      testOptions(seconds(5)));
  for (auto& e : errors) ADD_FAILURE() << e;
  for (int r : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + out[static_cast<size_t>(r)].message);
    EXPECT_EQ(out[static_cast<size_t>(r)].code, ErrorCode::kMismatch);
    EXPECT_NE(out[static_cast<size_t>(r)].message.find("split #0"), std::string::npos);
    EXPECT_NE(out[static_cast<size_t>(r)].message.find("rank 2"), std::string::npos);
    EXPECT_EQ(later[static_cast<size_t>(r)].code, ErrorCode::kAborted);
  }
  // Rank 2 fails in its all-gather (when the abort overtakes it) or in its next call.
  const Outcome& odd = out[2].code != ErrorCode::kOk ? out[2] : later[2];
  EXPECT_NE(odd.code, ErrorCode::kOk);
  EXPECT_NE(odd.message.find("split #0"), std::string::npos) << odd.message;
}

TEST(SplitFailures, SplitOfAnAbortedCommunicatorFails) {
  expectRanks(2, [](Communicator& c) {
    c.abort();
    try {
      c.split(0, 0);
    } catch (const Error& e) {
      require(e.code() == ErrorCode::kAborted, std::string("wrong code: ") + e.what());
      require(std::string(e.what()).find("split #0 (rank " + std::to_string(c.rank())) !=
                  std::string::npos,
              std::string("message does not name the split: ") + e.what());
      return;
    }
    throw std::runtime_error("split of an aborted communicator succeeded");
  });
}

// ---- C API ----

TEST(SplitCApi, CommSplit) {
  const int n = 5;
  runCRanks(n, [n](chorus_comm* comm, const Fail& fail) {
    const int r = chorus_comm_rank(comm);
    // Rank 4 opts out; the others split into {0, 2} and {1, 3}, each reversed by key.
    const int color = r == 4 ? CHORUS_NO_COLOR : r % 2;
    chorus_comm* sub = reinterpret_cast<chorus_comm*>(0x1);
    chorus_status s = chorus_comm_split(comm, color, -r, &sub);
    if (s != CHORUS_OK) {
      fail(std::string("chorus_comm_split: ") + chorus_status_string(s) + ": " +
           chorus_last_error(comm));
    } else if (color < 0) {
      if (sub != nullptr) fail("negative color: *out is not NULL");
    } else if (sub == nullptr) {
      fail("*out is NULL");
    } else {
      if (chorus_comm_size(sub) != 2 || chorus_comm_rank(sub) != (r < 2 ? 1 : 0)) {
        fail("wrong rank/size " + std::to_string(chorus_comm_rank(sub)) + "/" +
             std::to_string(chorus_comm_size(sub)));
      }
      int32_t v[3] = {r, 10 * r, -r};
      s = chorus_all_reduce(sub, v, v, 3, CHORUS_DTYPE_I32, CHORUS_OP_SUM);
      const int sum = r % 2 ? 1 + 3 : 0 + 2;
      if (s != CHORUS_OK || v[0] != sum || v[1] != 10 * sum || v[2] != -sum) {
        fail(std::string("allreduce on the new communicator: ") + chorus_last_error(sub));
      }
    }
    chorus_comm_destroy(sub);
    // The parent still works.
    int32_t x = 1;
    if (chorus_all_reduce(comm, &x, &x, 1, CHORUS_DTYPE_I32, CHORUS_OP_SUM) != CHORUS_OK ||
        x != n) {
      fail(std::string("allreduce on the parent: ") + chorus_last_error(comm));
    }
    // Argument errors: nothing is sent.
    if (chorus_comm_split(comm, 0, 0, nullptr) != CHORUS_ERR_INVALID_ARGUMENT ||
        std::string(chorus_last_error(comm)).find("chorus_comm_split") == std::string::npos) {
      fail("null out pointer not rejected");
    }
    chorus_comm* none = reinterpret_cast<chorus_comm*>(0x1);
    if (chorus_comm_split(nullptr, 0, 0, &none) != CHORUS_ERR_INVALID_ARGUMENT || none != nullptr) {
      fail("null communicator not rejected");
    }
  });
}

}  // namespace
}  // namespace chorus::testing
