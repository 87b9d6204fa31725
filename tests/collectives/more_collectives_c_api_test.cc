// The C API of reduce, gather, scatter, the v-variants and all-to-all(v): blocking and
// non-blocking forms over chorus_comm_init'ed thread-ranks, results checked against values computed
// here, and the status codes of bad calls.
#include <chorus/chorus.h>

#include "harness/c_ranks.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

using chorus::testing::Fail;
using chorus::testing::runCRanks;

// Element i of rank r's contribution.
int32_t value(int r, size_t i) { return 1000 * (r + 1) + static_cast<int32_t>(i); }

void everyCollective(int n) {
  runCRanks(n, [n](chorus_comm* comm, const Fail& fail) {
    const int me = chorus_comm_rank(comm);
    const auto nn = static_cast<size_t>(n);
    auto ok = [&](chorus_status s, const char* what) {
      if (s != CHORUS_OK) {
        fail(std::string(what) + ": " + chorus_status_string(s) + ": " + chorus_last_error(comm));
      }
      return s == CHORUS_OK;
    };
    auto expect = [&](bool good, const std::string& what) {
      if (!good) fail(what + ": wrong result");
    };
    const size_t k = 5;
    std::vector<int32_t> mine(k);
    for (size_t i = 0; i < k; ++i) mine[i] = value(me, i);

    // reduce (blocking, then non-blocking in place on the root)
    std::vector<int32_t> sum(k, -1);
    const int root = n - 1;
    if (ok(chorus_reduce(comm, mine.data(), me == root ? sum.data() : nullptr, k, CHORUS_DTYPE_I32,
                         CHORUS_OP_SUM, root),
           "chorus_reduce") &&
        me == root) {
      for (size_t i = 0; i < k; ++i) {
        int32_t want = 0;
        for (int r = 0; r < n; ++r) want += value(r, i);
        expect(sum[i] == want, "chorus_reduce");
      }
    }
    std::vector<int32_t> inout = mine;
    chorus_request* req = nullptr;
    if (ok(chorus_ireduce(comm, inout.data(), inout.data(), k, CHORUS_DTYPE_I32, CHORUS_OP_MAX, 0, &req),
           "chorus_ireduce") &&
        ok(chorus_request_wait(req), "chorus_request_wait(ireduce)") && me == 0) {
      for (size_t i = 0; i < k; ++i) expect(inout[i] == value(n - 1, i), "chorus_ireduce max");
    }

    // gather, then scatter back what was gathered
    std::vector<int32_t> all(k * nn, -1), back(k, -1);
    if (ok(chorus_gather(comm, mine.data(), all.data(), k, CHORUS_DTYPE_I32, 0), "chorus_gather") &&
        me == 0) {
      for (size_t i = 0; i < all.size(); ++i) {
        expect(all[i] == value(static_cast<int>(i / k), i % k), "chorus_gather");
      }
    }
    if (ok(chorus_iscatter(comm, all.data(), back.data(), k, CHORUS_DTYPE_I32, 0, &req),
           "chorus_iscatter") &&
        ok(chorus_request_wait(req), "chorus_request_wait(iscatter)")) {
      expect(back == mine, "chorus_iscatter");
    }

    // all-gather-v with a zero count, and reduce-scatter-v over the same counts
    std::vector<size_t> counts(nn);
    for (size_t r = 0; r < nn; ++r) counts[r] = r == 1 ? 0 : r + 2;
    const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
    std::vector<int32_t> block(counts[static_cast<size_t>(me)]);
    for (size_t i = 0; i < block.size(); ++i) block[i] = value(me, i);
    std::vector<int32_t> gathered(total, -1);
    if (ok(chorus_all_gather_v(comm, block.data(), gathered.data(), counts.data(), CHORUS_DTYPE_I32),
           "chorus_all_gather_v")) {
      size_t at = 0;
      for (size_t r = 0; r < nn; ++r) {
        for (size_t i = 0; i < counts[r]; ++i) {
          expect(gathered[at++] == value(static_cast<int>(r), i), "chorus_all_gather_v");
        }
      }
    }
    std::vector<int32_t> ones(total, me + 1), part(counts[static_cast<size_t>(me)], -1);
    if (ok(chorus_ireduce_scatter_v(comm, ones.data(), part.data(), counts.data(), CHORUS_DTYPE_I32,
                                    CHORUS_OP_SUM, &req),
           "chorus_ireduce_scatter_v") &&
        ok(chorus_request_wait(req), "chorus_request_wait(ireduce_scatter_v)")) {
      for (int32_t v : part) expect(v == n * (n + 1) / 2, "chorus_ireduce_scatter_v");
    }
    if (ok(chorus_reduce_scatter_v(comm, ones.data(), part.data(), counts.data(), CHORUS_DTYPE_I32,
                                   CHORUS_OP_MIN),
           "chorus_reduce_scatter_v")) {
      for (int32_t v : part) expect(v == 1, "chorus_reduce_scatter_v min");
    }
    std::vector<int32_t> gathered2(total, -1);
    if (ok(chorus_iall_gather_v(comm, block.data(), gathered2.data(), counts.data(), CHORUS_DTYPE_I32,
                                &req),
           "chorus_iall_gather_v") &&
        ok(chorus_request_wait(req), "chorus_request_wait(iall_gather_v)")) {
      expect(gathered2 == gathered, "chorus_iall_gather_v");
    }

    // all-to-all in place, and all-to-all-v where rank r sends q + 1 elements to rank q
    std::vector<int32_t> spread(2 * nn);
    for (size_t i = 0; i < spread.size(); ++i) spread[i] = value(me, i);
    if (ok(chorus_all_to_all(comm, spread.data(), spread.data(), 2, CHORUS_DTYPE_I32),
           "chorus_all_to_all")) {
      for (size_t q = 0; q < nn; ++q) {
        for (size_t i = 0; i < 2; ++i) {
          expect(spread[2 * q + i] == value(static_cast<int>(q), 2 * static_cast<size_t>(me) + i),
                 "chorus_all_to_all");
        }
      }
    }
    std::vector<size_t> sends(nn), recvs(nn, static_cast<size_t>(me) + 1);
    for (size_t q = 0; q < nn; ++q) sends[q] = q + 1;
    std::vector<int32_t> out(nn * (static_cast<size_t>(me) + 1), -1);
    std::vector<int32_t> in(nn * (nn + 1) / 2);
    for (size_t i = 0; i < in.size(); ++i) in[i] = value(me, i);
    if (ok(chorus_iall_to_all_v(comm, in.data(), sends.data(), out.data(), recvs.data(), CHORUS_DTYPE_I32,
                                &req),
           "chorus_iall_to_all_v") &&
        ok(chorus_request_wait(req), "chorus_request_wait(iall_to_all_v)")) {
      const size_t at = static_cast<size_t>(me) * (static_cast<size_t>(me) + 1) / 2;
      for (size_t q = 0; q < nn; ++q) {
        for (size_t i = 0; i <= static_cast<size_t>(me); ++i) {
          expect(out[q * (static_cast<size_t>(me) + 1) + i] == value(static_cast<int>(q), at + i),
                 "chorus_iall_to_all_v");
        }
      }
    }
    std::vector<int32_t> out2(out.size(), -1);
    if (ok(chorus_all_to_all_v(comm, in.data(), sends.data(), out2.data(), recvs.data(),
                               CHORUS_DTYPE_I32),
           "chorus_all_to_all_v")) {
      expect(out2 == out, "chorus_all_to_all_v");
    }
    std::vector<int32_t> spread2(2 * nn, -1);
    if (ok(chorus_iall_to_all(comm, spread.data(), spread2.data(), 2, CHORUS_DTYPE_I32, &req),
           "chorus_iall_to_all") &&
        ok(chorus_request_wait(req), "chorus_request_wait(iall_to_all)")) {
      for (size_t q = 0; q < nn; ++q) {
        expect(spread2[2 * q] == value(me, 2 * q), "chorus_iall_to_all (back where it was)");
      }
    }
    std::vector<int32_t> all2(k * nn, -1), back2(k, -1);
    if (ok(chorus_igather(comm, mine.data(), all2.data(), k, CHORUS_DTYPE_I32, 0, &req),
           "chorus_igather") &&
        ok(chorus_request_wait(req), "chorus_request_wait(igather)") && me == 0) {
      expect(all2 == all, "chorus_igather");
    }
    if (ok(chorus_scatter(comm, all.data(), back2.data(), k, CHORUS_DTYPE_I32, 0), "chorus_scatter")) {
      expect(back2 == mine, "chorus_scatter");
    }

    // Bad calls fail alone, with their status, and start nothing.
    auto bad = [&](chorus_status s, chorus_status want, const char* what) {
      if (s != want) {
        fail(std::string(what) + ": got " + chorus_status_string(s) + ", expected " +
             chorus_status_string(want));
      } else if (std::string(chorus_last_error(comm)).empty()) {
        fail(std::string(what) + ": no message");
      }
    };
    bad(chorus_reduce(comm, mine.data(), sum.data(), k, CHORUS_DTYPE_I32, CHORUS_OP_SUM, n),
        CHORUS_ERR_INVALID_ARGUMENT, "reduce to root n");
    bad(chorus_all_gather_v(comm, block.data(), gathered.data(), nullptr, CHORUS_DTYPE_I32),
        CHORUS_ERR_INVALID_ARGUMENT, "all_gather_v without counts");
    bad(chorus_ireduce_scatter_v(comm, ones.data(), part.data(), counts.data(), CHORUS_DTYPE_I32,
                                 static_cast<chorus_op>(42), &req),
        CHORUS_ERR_INVALID_ARGUMENT, "ireduce_scatter_v with op 42");
    bad(chorus_igather(comm, mine.data(), all.data(), k, CHORUS_DTYPE_I32, 0, nullptr),
        CHORUS_ERR_INVALID_ARGUMENT, "igather without a request pointer");
    bad(chorus_all_to_all_v(comm, in.data(), sends.data(), in.data(), sends.data(), CHORUS_DTYPE_I32),
        CHORUS_ERR_INVALID_ARGUMENT, "all_to_all_v in place");
    if (chorus_gather(nullptr, mine.data(), all.data(), k, CHORUS_DTYPE_I32, 0) !=
        CHORUS_ERR_INVALID_ARGUMENT) {
      fail("gather on a null communicator");
    }
    int32_t x = 1, y = 0;
    if (ok(chorus_reduce(comm, &x, &y, 1, CHORUS_DTYPE_I32, CHORUS_OP_SUM, 0), "reduce after bad calls") &&
        me == 0) {
      expect(y == n, "reduce after bad calls");
    }
  });
}

TEST(MoreCollectivesCApi, EveryCollectiveOnOneRank) { everyCollective(1); }
TEST(MoreCollectivesCApi, EveryCollectiveOnThreeRanks) { everyCollective(3); }
TEST(MoreCollectivesCApi, EveryCollectiveOnFiveRanks) { everyCollective(5); }

}  // namespace
