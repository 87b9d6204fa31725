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

// One rank's run of every collective, in the same order on every rank (the calls match by
// order); the later steps and the bad calls reuse the earlier steps' buffers.
class EveryCollective {
 public:
  EveryCollective(chorus_comm* comm, const Fail& fail, int n)
      : comm_(comm), fail_(fail), n_(n), nn_(static_cast<size_t>(n)), me_(chorus_comm_rank(comm)) {
    for (size_t i = 0; i < k_; ++i) mine_[i] = value(me_, i);
  }

  void run() {
    reduce();
    gatherThenScatter();
    vCollectives();
    allToAll();
    nonBlockingGatherAndBlockingScatter();
    badCalls();
  }

 private:
  bool ok(chorus_status s, const char* what) {
    if (s != CHORUS_OK) {
      fail_(std::string(what) + ": " + chorus_status_string(s) + ": " + chorus_last_error(comm_));
    }
    return s == CHORUS_OK;
  }
  void expect(bool good, const std::string& what) {
    if (!good) fail_(what + ": wrong result");
  }

  // reduce (blocking, then non-blocking in place on the root)
  void reduce() {
    const int root = n_ - 1;
    if (ok(chorus_reduce(comm_, mine_.data(), me_ == root ? sum_.data() : nullptr, k_,
                         CHORUS_DTYPE_I32, CHORUS_OP_SUM, root),
           "chorus_reduce") &&
        me_ == root) {
      for (size_t i = 0; i < k_; ++i) {
        int32_t want = 0;
        for (int r = 0; r < n_; ++r) want += value(r, i);
        expect(sum_[i] == want, "chorus_reduce");
      }
    }
    std::vector<int32_t> inout = mine_;
    if (ok(chorus_ireduce(comm_, inout.data(), inout.data(), k_, CHORUS_DTYPE_I32, CHORUS_OP_MAX, 0,
                          &req_),
           "chorus_ireduce") &&
        ok(chorus_request_wait(req_), "chorus_request_wait(ireduce)") && me_ == 0) {
      for (size_t i = 0; i < k_; ++i) expect(inout[i] == value(n_ - 1, i), "chorus_ireduce max");
    }
  }

  // gather, then scatter back what was gathered
  void gatherThenScatter() {
    std::vector<int32_t> back(k_, -1);
    if (ok(chorus_gather(comm_, mine_.data(), all_.data(), k_, CHORUS_DTYPE_I32, 0),
           "chorus_gather") &&
        me_ == 0) {
      for (size_t i = 0; i < all_.size(); ++i) {
        expect(all_[i] == value(static_cast<int>(i / k_), i % k_), "chorus_gather");
      }
    }
    if (ok(chorus_iscatter(comm_, all_.data(), back.data(), k_, CHORUS_DTYPE_I32, 0, &req_),
           "chorus_iscatter") &&
        ok(chorus_request_wait(req_), "chorus_request_wait(iscatter)")) {
      expect(back == mine_, "chorus_iscatter");
    }
  }

  // all-gather-v with a zero count, and reduce-scatter-v over the same counts
  void vCollectives() {
    for (size_t r = 0; r < nn_; ++r) counts_[r] = r == 1 ? 0 : r + 2;
    const size_t total = std::accumulate(counts_.begin(), counts_.end(), size_t{0});
    block_.resize(counts_[static_cast<size_t>(me_)]);
    for (size_t i = 0; i < block_.size(); ++i) block_[i] = value(me_, i);
    gathered_.assign(total, -1);
    if (ok(chorus_all_gather_v(comm_, block_.data(), gathered_.data(), counts_.data(),
                               CHORUS_DTYPE_I32),
           "chorus_all_gather_v")) {
      size_t at = 0;
      for (size_t r = 0; r < nn_; ++r) {
        for (size_t i = 0; i < counts_[r]; ++i) {
          expect(gathered_[at++] == value(static_cast<int>(r), i), "chorus_all_gather_v");
        }
      }
    }
    ones_.assign(total, me_ + 1);
    part_.assign(counts_[static_cast<size_t>(me_)], -1);
    if (ok(chorus_ireduce_scatter_v(comm_, ones_.data(), part_.data(), counts_.data(),
                                    CHORUS_DTYPE_I32, CHORUS_OP_SUM, &req_),
           "chorus_ireduce_scatter_v") &&
        ok(chorus_request_wait(req_), "chorus_request_wait(ireduce_scatter_v)")) {
      for (int32_t v : part_) expect(v == n_ * (n_ + 1) / 2, "chorus_ireduce_scatter_v");
    }
    if (ok(chorus_reduce_scatter_v(comm_, ones_.data(), part_.data(), counts_.data(),
                                   CHORUS_DTYPE_I32, CHORUS_OP_MIN),
           "chorus_reduce_scatter_v")) {
      for (int32_t v : part_) expect(v == 1, "chorus_reduce_scatter_v min");
    }
    std::vector<int32_t> gathered2(total, -1);
    if (ok(chorus_iall_gather_v(comm_, block_.data(), gathered2.data(), counts_.data(),
                                CHORUS_DTYPE_I32, &req_),
           "chorus_iall_gather_v") &&
        ok(chorus_request_wait(req_), "chorus_request_wait(iall_gather_v)")) {
      expect(gathered2 == gathered_, "chorus_iall_gather_v");
    }
  }

  // all-to-all in place, and all-to-all-v where rank r sends q + 1 elements to rank q
  void allToAll() {
    std::vector<int32_t> spread(2 * nn_);
    for (size_t i = 0; i < spread.size(); ++i) spread[i] = value(me_, i);
    if (ok(chorus_all_to_all(comm_, spread.data(), spread.data(), 2, CHORUS_DTYPE_I32),
           "chorus_all_to_all")) {
      for (size_t q = 0; q < nn_; ++q) {
        for (size_t i = 0; i < 2; ++i) {
          expect(spread[2 * q + i] == value(static_cast<int>(q), 2 * static_cast<size_t>(me_) + i),
                 "chorus_all_to_all");
        }
      }
    }
    const auto each = static_cast<size_t>(me_) + 1;  // elements from each rank
    std::vector<size_t> recvs(nn_, each);
    for (size_t q = 0; q < nn_; ++q) sends_[q] = q + 1;
    std::vector<int32_t> out(nn_ * each, -1);
    for (size_t i = 0; i < in_.size(); ++i) in_[i] = value(me_, i);
    if (ok(chorus_iall_to_all_v(comm_, in_.data(), sends_.data(), out.data(), recvs.data(),
                                CHORUS_DTYPE_I32, &req_),
           "chorus_iall_to_all_v") &&
        ok(chorus_request_wait(req_), "chorus_request_wait(iall_to_all_v)")) {
      const size_t at = static_cast<size_t>(me_) * each / 2;
      for (size_t q = 0; q < nn_; ++q) {
        for (size_t i = 0; i < each; ++i) {
          expect(out[q * each + i] == value(static_cast<int>(q), at + i), "chorus_iall_to_all_v");
        }
      }
    }
    std::vector<int32_t> out2(out.size(), -1);
    if (ok(chorus_all_to_all_v(comm_, in_.data(), sends_.data(), out2.data(), recvs.data(),
                               CHORUS_DTYPE_I32),
           "chorus_all_to_all_v")) {
      expect(out2 == out, "chorus_all_to_all_v");
    }
    std::vector<int32_t> spread2(2 * nn_, -1);
    if (ok(chorus_iall_to_all(comm_, spread.data(), spread2.data(), 2, CHORUS_DTYPE_I32, &req_),
           "chorus_iall_to_all") &&
        ok(chorus_request_wait(req_), "chorus_request_wait(iall_to_all)")) {
      for (size_t q = 0; q < nn_; ++q) {
        expect(spread2[2 * q] == value(me_, 2 * q), "chorus_iall_to_all (back where it was)");
      }
    }
  }

  // The other forms of gather and scatter, against what gather got.
  void nonBlockingGatherAndBlockingScatter() {
    std::vector<int32_t> all2(k_ * nn_, -1), back2(k_, -1);
    if (ok(chorus_igather(comm_, mine_.data(), all2.data(), k_, CHORUS_DTYPE_I32, 0, &req_),
           "chorus_igather") &&
        ok(chorus_request_wait(req_), "chorus_request_wait(igather)") && me_ == 0) {
      expect(all2 == all_, "chorus_igather");
    }
    if (ok(chorus_scatter(comm_, all_.data(), back2.data(), k_, CHORUS_DTYPE_I32, 0),
           "chorus_scatter")) {
      expect(back2 == mine_, "chorus_scatter");
    }
  }

  // Bad calls fail alone, with their status, and start nothing.
  void badCalls() {
    auto bad = [&](chorus_status s, chorus_status want, const char* what) {
      if (s != want) {
        fail_(std::string(what) + ": got " + chorus_status_string(s) + ", expected " +
              chorus_status_string(want));
      } else if (std::string(chorus_last_error(comm_)).empty()) {
        fail_(std::string(what) + ": no message");
      }
    };
    bad(chorus_reduce(comm_, mine_.data(), sum_.data(), k_, CHORUS_DTYPE_I32, CHORUS_OP_SUM, n_),
        CHORUS_ERR_INVALID_ARGUMENT, "reduce to root n");
    bad(chorus_all_gather_v(comm_, block_.data(), gathered_.data(), nullptr, CHORUS_DTYPE_I32),
        CHORUS_ERR_INVALID_ARGUMENT, "all_gather_v without counts");
    bad(chorus_ireduce_scatter_v(comm_, ones_.data(), part_.data(), counts_.data(),
                                 CHORUS_DTYPE_I32, static_cast<chorus_op>(42), &req_),
        CHORUS_ERR_INVALID_ARGUMENT, "ireduce_scatter_v with op 42");
    bad(chorus_igather(comm_, mine_.data(), all_.data(), k_, CHORUS_DTYPE_I32, 0, nullptr),
        CHORUS_ERR_INVALID_ARGUMENT, "igather without a request pointer");
    bad(chorus_all_to_all_v(comm_, in_.data(), sends_.data(), in_.data(), sends_.data(),
                            CHORUS_DTYPE_I32),
        CHORUS_ERR_INVALID_ARGUMENT, "all_to_all_v in place");
    if (chorus_gather(nullptr, mine_.data(), all_.data(), k_, CHORUS_DTYPE_I32, 0) !=
        CHORUS_ERR_INVALID_ARGUMENT) {
      fail_("gather on a null communicator");
    }
    int32_t x = 1, y = 0;
    if (ok(chorus_reduce(comm_, &x, &y, 1, CHORUS_DTYPE_I32, CHORUS_OP_SUM, 0),
           "reduce after bad calls") &&
        me_ == 0) {
      expect(y == n_, "reduce after bad calls");
    }
  }

  chorus_comm* const comm_;
  const Fail& fail_;
  const int n_;
  const size_t nn_;
  const int me_;
  const size_t k_ = 5;
  chorus_request* req_ = nullptr;
  std::vector<int32_t> mine_ = std::vector<int32_t>(k_);
  std::vector<int32_t> sum_ = std::vector<int32_t>(k_, -1);
  std::vector<int32_t> all_ = std::vector<int32_t>(k_ * nn_, -1);  // what gather got
  std::vector<size_t> counts_ = std::vector<size_t>(nn_);
  std::vector<int32_t> block_, gathered_, ones_, part_;
  std::vector<size_t> sends_ = std::vector<size_t>(nn_);
  std::vector<int32_t> in_ = std::vector<int32_t>(nn_ * (nn_ + 1) / 2);
};

void everyCollective(int n) {
  runCRanks(n, [n](chorus_comm* comm, const Fail& fail) { EveryCollective(comm, fail, n).run(); });
}

TEST(MoreCollectivesCApi, EveryCollectiveOnOneRank) { everyCollective(1); }
TEST(MoreCollectivesCApi, EveryCollectiveOnThreeRanks) { everyCollective(3); }
TEST(MoreCollectivesCApi, EveryCollectiveOnFiveRanks) { everyCollective(5); }

}  // namespace
