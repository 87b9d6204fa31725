// Every collective over TCP with CHORUS_ENCRYPT=1 (threads as ranks, one job key): counts 0, 1,
// a prime and one large enough for many records per message, checked against values computed
// here. And the setting's errors: encryption without a key, ranks that disagree.
#include "auth/record_cipher.h"
#include "auth_test_util.h"
#include "harness/thread_ranks.h"
#include "transport/connect.h"
#include "transport/tcp/dial.h"
#include "transport/tcp/endpoint.h"
#include "unit/scoped_env.h"

#include <chorus/chorus.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace chorus {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

int64_t valueOf(int rank, size_t i) { return int64_t{rank} * 1'000'003 + static_cast<int64_t>(i); }

void expectEqual(const std::string& what, int rank, const std::vector<int64_t>& got,
                 const std::vector<int64_t>& want) {
  if (got == want) return;
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  throw std::runtime_error(what + " count " + std::to_string(want.size()) + ": rank " +
                           std::to_string(rank) + " differs at element " + std::to_string(i));
}

// Runs every collective at `count` elements per rank (per peer for all-to-all) and checks it.
void everyCollective(Communicator& c, size_t count) {
  const int n = c.size();
  const int me = c.rank();
  const auto N = static_cast<size_t>(n);
  std::vector<int64_t> mine(count);
  for (size_t i = 0; i < count; ++i) mine[i] = valueOf(me, i);
  auto sumAt = [&](size_t i) {
    int64_t s = 0;
    for (int r = 0; r < n; ++r) s += valueOf(r, i);
    return s;
  };

  std::vector<int64_t> sum(count), want(count);
  for (size_t i = 0; i < count; ++i) want[i] = sumAt(i);
  c.allReduce(std::span<const int64_t>(mine), std::span<int64_t>(sum)).wait();
  expectEqual("all_reduce", me, sum, want);

  std::vector<int64_t> reduced(count, -1);
  c.reduce(std::span<const int64_t>(mine), std::span<int64_t>(reduced), n - 1).wait();
  if (me == n - 1) expectEqual("reduce", me, reduced, want);

  std::vector<int64_t> bcast = me == 1 ? mine : std::vector<int64_t>(count, -1);
  c.broadcast(std::span<int64_t>(bcast), 1).wait();
  std::vector<int64_t> fromOne(count);
  for (size_t i = 0; i < count; ++i) fromOne[i] = valueOf(1, i);
  expectEqual("broadcast", me, bcast, fromOne);

  std::vector<int64_t> all(count * N), allWant(count * N);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) allWant[static_cast<size_t>(r) * count + i] = valueOf(r, i);
  }
  c.allGather(std::span<const int64_t>(mine), std::span<int64_t>(all)).wait();
  expectEqual("all_gather", me, all, allWant);

  std::vector<int64_t> gathered(me == 0 ? count * N : 0);
  c.gather(std::span<const int64_t>(mine), std::span<int64_t>(gathered), 0).wait();
  if (me == 0) expectEqual("gather", me, gathered, allWant);

  // Scatter and reduce-scatter: block r of the input goes to rank r.
  std::vector<int64_t> block(count), blockWant(count);
  c.scatter(std::span<const int64_t>(allWant), std::span<int64_t>(block), 0).wait();
  for (size_t i = 0; i < count; ++i) blockWant[i] = valueOf(me, i);
  expectEqual("scatter", me, block, blockWant);

  std::vector<int64_t> big(count * N);
  for (size_t i = 0; i < big.size(); ++i) big[i] = valueOf(me, i);
  c.reduceScatter(std::span<const int64_t>(big), std::span<int64_t>(block)).wait();
  for (size_t i = 0; i < count; ++i) blockWant[i] = sumAt(static_cast<size_t>(me) * count + i);
  expectEqual("reduce_scatter", me, block, blockWant);

  // All-to-all: rank r sends element i of block p as valueOf(r, p * count + i).
  std::vector<int64_t> swapped(count * N), swapWant(count * N);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      swapWant[static_cast<size_t>(r) * count + i] =
          valueOf(r, static_cast<size_t>(me) * count + i);
    }
  }
  c.allToAll(std::span<const int64_t>(big), std::span<int64_t>(swapped)).wait();
  expectEqual("all_to_all", me, swapped, swapWant);

  // Point to point around the ring.
  std::vector<int64_t> got(count, -1), gotWant(count);
  const int from = (me + n - 1) % n;
  for (size_t i = 0; i < count; ++i) gotWant[i] = valueOf(from, i);
  auto r = c.recv(std::span<int64_t>(got), from);
  c.send(std::span<const int64_t>(mine), (me + 1) % n).wait();
  r.wait();
  expectEqual("send/recv", me, got, gotWant);
  c.barrier().wait();
}

class Encrypted : public ::testing::Test {
 protected:
  void SetUp() override {
    keyPath_ = authtest::writeKey(dir_, "job.key");
    env_.set("CHORUS_AUTH", nullptr);
    env_.set("CHORUS_AUTH_KEY_FILE", keyPath_.c_str());
    env_.set("CHORUS_ENCRYPT", "1");
  }
  static Options tcpOptions() {
    Options o = testing::testOptions(60s);
    o.transport = TransportKind::kTcp;
    return o;
  }
  test::ScratchDir dir_;
  std::string keyPath_;
  ScopedEnv env_;
};

TEST_F(Encrypted, EveryCollectiveIsRightAtEveryCount) {
  // 0, 1, a prime, and 400 KB per rank (several 64 KiB records per message).
  testing::expectRanks(
      3,
      [](Communicator& c) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{1009}, size_t{51'203}}) {
          everyCollective(c, count);
        }
      },
      tcpOptions());
}

TEST_F(Encrypted, TwoRanksMoveSeveralMegabytesBothWays) {
  testing::expectRanks(
      2,
      [](Communicator& c) {
        std::vector<int64_t> v(1'000'003), want(v.size());
        for (size_t i = 0; i < v.size(); ++i) {
          v[i] = valueOf(c.rank(), i);
          want[i] = valueOf(0, i) + valueOf(1, i);
        }
        c.allReduce(std::span<int64_t>(v)).wait();
        expectEqual("all_reduce", c.rank(), v, want);
      },
      tcpOptions());
}

TEST_F(Encrypted, WithoutAKeyCreationFailsSayingSo) {
  env_.set("CHORUS_AUTH_KEY_FILE", nullptr);
  auto store = makeHashStore();
  try {
    transport::connect(*store, 0, 2, tcpOptions(), "127.0.0.1");
    ADD_FAILURE() << "CHORUS_ENCRYPT=1 ran without a key";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("CHORUS_ENCRYPT=1 needs a key"));
  }
  env_.set("CHORUS_ENCRYPT", "yes");
  EXPECT_THROW(transport::connect(*store, 0, 2, tcpOptions(), "127.0.0.1"), Error);
}

// Both ends of one connection, one encrypting and one not: each fails naming the setting.
TEST_F(Encrypted, RanksThatDisagreeAreToldWhichSettingDiffers) {
  const auth::JobKey key = auth::loadKeyFile(keyPath_);
  for (bool lowerEncrypts : {true, false}) {
    int port = 0;
    Fd listener = transport::tcp::listenOn("127.0.0.1", 0, false, &port);
    transport::JobId job{};
    job[0] = 7;
    auto lower = std::async(std::launch::async, [&]() -> std::string {
      try {
        transport::tcp::acceptHigher(listener.get(), 0, 2, job, &key, lowerEncrypts, 10s,
                                     Deadline::after(20s));
        return "";
      } catch (const Error& e) {
        return e.what();
      }
    });
    std::string higher;
    try {
      transport::tcp::dialLower("127.0.0.1:" + std::to_string(port), 1, 2, 0, job, &key,
                                !lowerEncrypts, 0, false, Deadline::after(20s));
    } catch (const Error& e) {
      higher = e.what();
    }
    const std::string lowerError = lower.get();
    for (const std::string& e : {lowerError, higher}) {
      EXPECT_THAT(e, HasSubstr("every rank of a job needs the same CHORUS_ENCRYPT"));
    }
    EXPECT_THAT(lowerError, HasSubstr("rank 1 ("));
    EXPECT_THAT(higher, HasSubstr("rank 0 ("));
    EXPECT_THAT(lowerEncrypts ? lowerError : higher, HasSubstr("does not encrypt"));
  }
}

}  // namespace
}  // namespace chorus
