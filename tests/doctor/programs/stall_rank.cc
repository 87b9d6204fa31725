// A rank for the end-to-end doctor tests: CALLS all-reduces of 8 floats through the C API; rank
// STALL sleeps SLEEP seconds before its call number BEFORE (from 0), alive but stuck. Prints the
// error of a failed call and exits 1; 0 when every call succeeded.
//   stall_rank CALLS STALL BEFORE SLEEP
#include <chorus/chorus.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: stall_rank CALLS STALL BEFORE SLEEP\n");
    return 2;
  }
  const int calls = atoi(argv[1]), stall = atoi(argv[2]), before = atoi(argv[3]);
  const double sleepSeconds = atof(argv[4]);
  chorus_comm* comm = nullptr;
  if (chorus_comm_init_from_env(&comm) != CHORUS_OK) {
    std::fprintf(stderr, "stall_rank: chorus_comm_init_from_env failed\n");
    return 1;
  }
  const int rank = chorus_comm_rank(comm);
  float data[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  for (int i = 0; i < calls; ++i) {
    if (rank == stall && i == before) {
      std::this_thread::sleep_for(std::chrono::duration<double>(sleepSeconds));
    }
    chorus_status st = chorus_all_reduce(comm, data, data, 8, CHORUS_DTYPE_F32, CHORUS_OP_SUM);
    if (st != CHORUS_OK) {
      std::fprintf(stderr, "rank %d: call %d failed: %s\n", rank, i, chorus_last_error(comm));
      chorus_comm_destroy(comm);
      return 1;
    }
  }
  chorus_comm_destroy(comm);
  return 0;
}
