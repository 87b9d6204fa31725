// mp_worker, modes "kill", "exit-early" and "mismatch-*": how ranks fail.
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

// ---- failures ----

// Reports the call after a failure (it must be refused with the original cause) and how long
// chorus_comm_destroy takes. Returns the exit code for `first`.
int finishAfterFailure(Ctx& c, chorus_status first, int lingerMs = 0) {
  float x = 1;
  chorus_status next = chorus_all_reduce(c.comm, &x, &x, 1, CHORUS_DTYPE_F32, CHORUS_OP_SUM);
  result(c, "next", next);
  int64_t t0 = monoMs();
  chorus_comm_destroy(c.comm);
  c.comm = nullptr;
  result(c, "destroy", CHORUS_OK, "destroy_ms=" + std::to_string(monoMs() - t0), "");
  std::this_thread::sleep_for(std::chrono::milliseconds(lingerMs));
  return first == CHORUS_OK ? 0 : 1;
}

// op: allreduce, or one of reduce (to rank 0), all_to_all, all_gather_v (equal counts).
int runKill(Ctx& c, int victim, int mib, int delayMs, int lingerMs, const std::string& op) {
  const size_t count = static_cast<size_t>(mib) * (1u << 20) / 4;
  const int n = chorus_comm_size(c.comm);
  const size_t block = count / static_cast<size_t>(n);
  const std::vector<size_t> counts(static_cast<size_t>(n), block);
  std::vector<float> buf(count), out(count);
  for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((i + c.rank) % 17);
  chorus_status st = chorus_barrier(c.comm);
  if (st != CHORUS_OK) {
    result(c, "barrier", st);
    return 1;
  }
  if (c.rank == victim) {
    std::thread([victim, delayMs] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
      say("KILL rank=" + std::to_string(victim) + " mono_ms=" + std::to_string(monoMs()));
      raise(SIGKILL);
    }).detach();
  }
  int iter = 0;
  int64_t callStart = 0, end = 0;
  // Calls until the failure shows, however fast they run: a count of calls alone ran out before
  // the kill once shared memory got faster. The time bound only ends a run whose victim lived.
  const int64_t giveUpAt = monoMs() + delayMs + 60'000;
  for (; monoMs() < giveUpAt; ++iter) {
    callStart = monoMs();
    if (op == "reduce") {
      st = chorus_reduce(c.comm, buf.data(), out.data(), count, CHORUS_DTYPE_F32, CHORUS_OP_MAX, 0);
    } else if (op == "all_to_all") {
      st = chorus_all_to_all(c.comm, buf.data(), out.data(), block, CHORUS_DTYPE_F32);
    } else if (op == "all_gather_v") {
      st = chorus_all_gather_v(c.comm, buf.data(), out.data(), counts.data(), CHORUS_DTYPE_F32);
    } else {
      st =
          chorus_all_reduce(c.comm, buf.data(), buf.data(), count, CHORUS_DTYPE_F32, CHORUS_OP_MAX);
    }
    end = monoMs();
    if (st != CHORUS_OK) break;
  }
  result(c, "first", st,
         "iter=" + std::to_string(iter) + " call_ms=" + std::to_string(end - callStart) +
             " detect_mono_ms=" + std::to_string(end));
  // chorus-run reports the first rank it sees fail: let it see the killed one first.
  return finishAfterFailure(c, st, lingerMs);
}

int runExitEarly(Ctx& c, int leaver, int settleMs) {
  const size_t count = 1 << 20;
  std::vector<float> buf(count, 1.0f);
  for (int i = 0; i < 2; ++i) {
    chorus_status st =
        chorus_all_reduce(c.comm, buf.data(), buf.data(), count, CHORUS_DTYPE_F32, CHORUS_OP_MAX);
    if (st != CHORUS_OK) {
      result(c, "warmup", st);
      return 1;
    }
  }
  if (c.rank == leaver) {
    // Let the others finish the second all-reduce first: see runMismatch.
    std::this_thread::sleep_for(std::chrono::milliseconds(settleMs));
    int64_t t0 = monoMs();
    chorus_comm_destroy(c.comm);
    c.comm = nullptr;
    result(c, "leave", CHORUS_OK,
           "destroy_ms=" + std::to_string(monoMs() - t0) + " left_mono_ms=" + std::to_string(t0),
           "");
    return 0;
  }
  int64_t t0 = monoMs();
  chorus_status st =
      chorus_all_reduce(c.comm, buf.data(), buf.data(), count, CHORUS_DTYPE_F32, CHORUS_OP_MAX);
  int64_t end = monoMs();
  result(c, "first", st,
         "call_ms=" + std::to_string(end - t0) + " detect_mono_ms=" + std::to_string(end));
  return finishAfterFailure(c, st);
}

int runMismatch(Ctx& c, const std::string& kind, bool allOdd, size_t count, int settleMs) {
  const bool differs = allOdd ? c.rank % 2 == 1 : c.rank == 1;
  std::vector<float> buf(count + 1, 1.0f);
  // Two good calls first, so the mismatch is not at sequence number 0.
  chorus_status st = chorus_barrier(c.comm);
  if (st == CHORUS_OK) {
    st = chorus_all_reduce(c.comm, buf.data(), buf.data(), count, CHORUS_DTYPE_F32, CHORUS_OP_MAX);
  }
  if (st != CHORUS_OK) {
    result(c, "warmup", st);
    return 1;
  }
  // Ranks leave a collective at different times. A rank that detects the mismatch aborts at
  // once, and its abort message fails a peer still finishing the previous (good) collective: let
  // every rank finish it first (SETTLE_MS 0 shows that race).
  std::this_thread::sleep_for(std::chrono::milliseconds(settleMs));
  void* b = buf.data();
  if (kind == "count") {
    st = chorus_all_reduce(c.comm, b, b, differs ? count + 1 : count, CHORUS_DTYPE_F32,
                           CHORUS_OP_SUM);
  } else if (kind == "op") {
    st = chorus_all_reduce(c.comm, b, b, count, CHORUS_DTYPE_F32,
                           differs ? CHORUS_OP_MAX : CHORUS_OP_SUM);
  } else if (kind == "dtype") {
    st = chorus_all_reduce(c.comm, b, b, count, differs ? CHORUS_DTYPE_I32 : CHORUS_DTYPE_F32,
                           CHORUS_OP_MAX);
  } else if (kind == "collective") {
    st = differs ? chorus_broadcast(c.comm, b, count, CHORUS_DTYPE_F32, 0)
                 : chorus_all_reduce(c.comm, b, b, count, CHORUS_DTYPE_F32, CHORUS_OP_SUM);
  } else if (kind == "root") {
    st = chorus_broadcast(c.comm, b, count, CHORUS_DTYPE_F32, differs ? 1 : 0);
  } else {
    fatal("unknown mismatch kind '" + kind + "'");
  }
  result(c, "first", st, differs ? "differs=1" : "differs=0");
  return finishAfterFailure(c, st);
}

}  // namespace mpworker
