// mp_worker, mode "invalid": refused calls start nothing.
#include "modes.h"

#include <chorus/chorus.h>
#include <chorus/store.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace mpworker {

// ---- invalid ----

int runInvalid(Ctx& c) {
  const int n = c.size;
  const size_t N = static_cast<size_t>(n);
  std::vector<float> a(64 * N + 64, 1.0f), b(64 * N + 64, 0.0f);
  const auto badType = static_cast<chorus_dtype>(99);
  const auto badOp = static_cast<chorus_op>(99);
  bool allGood = true;
  auto expect = [&](const std::string& name, chorus_status st, const char* msg = nullptr) {
    result(c, name, st, "", msg);
    if (st != CHORUS_ERR_INVALID_ARGUMENT) allGood = false;
  };
  // Rank 0 makes every invalid call twice: one that started anything (took a sequence number,
  // sent a frame) would put the ranks out of step and fail the valid call at the end.
  for (int round = 0; round < (c.rank == 0 ? 2 : 1); ++round) {
    expect("allreduce-null-send",
           chorus_all_reduce(c.comm, nullptr, b.data(), 10, CHORUS_DTYPE_F32, CHORUS_OP_SUM));
    expect("allreduce-null-recv",
           chorus_all_reduce(c.comm, a.data(), nullptr, 10, CHORUS_DTYPE_F32, CHORUS_OP_SUM));
    expect("allreduce-bad-dtype",
           chorus_all_reduce(c.comm, a.data(), b.data(), 10, badType, CHORUS_OP_SUM));
    expect("allreduce-bad-op",
           chorus_all_reduce(c.comm, a.data(), b.data(), 10, CHORUS_DTYPE_F32, badOp));
    expect("allreduce-overlap",
           chorus_all_reduce(c.comm, a.data(), a.data() + 1, 10, CHORUS_DTYPE_F32, CHORUS_OP_SUM));
    expect("allreduce-count-too-large", chorus_all_reduce(c.comm, a.data(), b.data(), SIZE_MAX,
                                                          CHORUS_DTYPE_F32, CHORUS_OP_SUM));
    expect("reduce_scatter-bad-op",
           chorus_reduce_scatter(c.comm, a.data(), b.data(), 4, CHORUS_DTYPE_F32,
                                 static_cast<chorus_op>(-1)));
    expect("reduce_scatter-null-recv",
           chorus_reduce_scatter(c.comm, a.data(), nullptr, 4, CHORUS_DTYPE_F32, CHORUS_OP_SUM));
    expect("reduce_scatter-overlap",
           chorus_reduce_scatter(c.comm, a.data(), a.data() + 4 * c.rank + 1, 4, CHORUS_DTYPE_F32,
                                 CHORUS_OP_SUM));
    expect("all_gather-bad-dtype", chorus_all_gather(c.comm, a.data(), b.data(), 4, badType));
    expect("all_gather-overlap",
           chorus_all_gather(c.comm, b.data() + 4 * c.rank + 1, b.data(), 4, CHORUS_DTYPE_F32));
    expect("broadcast-null-buf", chorus_broadcast(c.comm, nullptr, 4, CHORUS_DTYPE_F32, 0));
    expect("broadcast-root-negative", chorus_broadcast(c.comm, a.data(), 4, CHORUS_DTYPE_F32, -1));
    expect("broadcast-root-too-large", chorus_broadcast(c.comm, a.data(), 4, CHORUS_DTYPE_F32, n));
    expect("broadcast-bad-dtype", chorus_broadcast(c.comm, a.data(), 4, badType, 0));
    chorus_request* req = reinterpret_cast<chorus_request*>(&a);  // must be reset to NULL
    expect("iallreduce-bad-op",
           chorus_iall_reduce(c.comm, a.data(), b.data(), 10, CHORUS_DTYPE_F32, badOp, &req));
    if (req != nullptr) {
      say("WRONG rank=" + std::to_string(c.rank) + " case=iallreduce-bad-op request not NULL");
      allGood = false;
    }
    expect("iallreduce-null-request", chorus_iall_reduce(c.comm, a.data(), b.data(), 10,
                                                         CHORUS_DTYPE_F32, CHORUS_OP_SUM, nullptr));
    expect("ibroadcast-root-too-large",
           chorus_ibroadcast(c.comm, a.data(), 4, CHORUS_DTYPE_F32, n + 5, &req));
    // No communicator: the message can only come from chorus_last_error(NULL).
    expect("null-comm",
           chorus_all_reduce(nullptr, a.data(), b.data(), 10, CHORUS_DTYPE_F32, CHORUS_OP_SUM),
           chorus_last_error(nullptr));
    expect("wait-null", chorus_request_wait(nullptr), "");
    int done = 0;
    expect("test-null", chorus_request_test(nullptr, &done), "");
  }
  // Nothing was started: a valid call still works on every rank.
  for (size_t i = 0; i < 100; ++i) a[i] = static_cast<float>(c.rank + 1);
  chorus_status st =
      chorus_all_reduce(c.comm, a.data(), b.data(), 100, CHORUS_DTYPE_F32, CHORUS_OP_SUM);
  bool right = true;
  for (size_t i = 0; i < 100 && st == CHORUS_OK; ++i) {
    right = right && b[i] == static_cast<float>(n * (n + 1) / 2);
  }
  result(c, "valid", st, right ? "right=1" : "right=0");
  if (st != CHORUS_OK || !right) allGood = false;
  chorus_comm_destroy(c.comm);
  return allGood ? 0 : 1;
}

}  // namespace mpworker
