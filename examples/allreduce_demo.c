/* Chorus demo: every rank All-Reduces buffers of several sizes, checks the result and rank 0
 * prints time, algbw and busbw (nccl-tests definitions).
 *   chorus-run -n 4 -- ./allreduce_demo                                                       */
#include <chorus/chorus.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int fail(chorus_comm* comm, chorus_status s, const char* what) {
  fprintf(stderr, "%s failed: %s: %s\n", what, chorus_status_string(s), chorus_last_error(comm));
  chorus_comm_destroy(comm);
  return 1;
}

int main(void) {
  chorus_comm* comm = NULL;
  chorus_status s = chorus_comm_init_from_env(&comm);
  if (s != CHORUS_OK) return fail(NULL, s, "chorus_comm_init_from_env");
  const int rank = chorus_comm_rank(comm), n = chorus_comm_size(comm);
  const size_t sizes[] = {8, 1024, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
  const size_t max_count = (64 << 20) / sizeof(float);
  float* buf = malloc(max_count * sizeof(float));
  if (buf == NULL) return fail(comm, CHORUS_ERR_SYSTEM, "malloc");
  if (rank == 0) {
    printf("Chorus all-reduce demo: %d ranks, f32 sum\n", n);
    printf("%12s %12s %10s %10s  %s\n", "size(B)", "time(us)", "algbw", "busbw", "check");
    printf("%12s %12s %10s %10s\n", "", "", "(GB/s)", "(GB/s)");
  }
  for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); ++k) {
    const size_t count = sizes[k] / sizeof(float);
    const int iters = sizes[k] >= (16 << 20) ? 5 : 20;
    double best = 1e30;
    int ok = 1;
    for (int it = 0; it < iters + 1; ++it) {
      for (size_t i = 0; i < count; ++i) buf[i] = (float)(rank + 1) + (float)(i % 5);
      if ((s = chorus_barrier(comm)) != CHORUS_OK) return fail(comm, s, "chorus_barrier");
      double t0 = now_us();
      s = chorus_all_reduce(comm, buf, buf, count, CHORUS_DTYPE_F32, CHORUS_OP_SUM);
      double t = now_us() - t0;
      if (s != CHORUS_OK) return fail(comm, s, "chorus_all_reduce");
      if (it > 0 && t < best) best = t; /* the first call is a warm-up */
      /* sum over ranks of (r+1) + i%5 = n(n+1)/2 + n*(i%5): exact in f32 */
      for (size_t i = 0; i < count; ++i) {
        if (buf[i] != (float)(n * (n + 1) / 2) + (float)n * (float)(i % 5)) ok = 0;
      }
    }
    /* The slowest rank's time is what the job sees. */
    double worst = best;
    if ((s = chorus_all_reduce(comm, &best, &worst, 1, CHORUS_DTYPE_F64, CHORUS_OP_MAX)) != CHORUS_OK) {
      return fail(comm, s, "chorus_all_reduce");
    }
    int bad = !ok, anyBad = 0;
    if ((s = chorus_all_reduce(comm, &bad, &anyBad, 1, CHORUS_DTYPE_I32, CHORUS_OP_MAX)) != CHORUS_OK) {
      return fail(comm, s, "chorus_all_reduce");
    }
    double algbw = (double)sizes[k] / worst / 1e3; /* bytes/us -> GB/s */
    double busbw = algbw * 2.0 * (n - 1) / n;
    if (rank == 0) {
      printf("%12zu %12.1f %10.3f %10.3f  %s\n", sizes[k], worst, algbw, busbw,
             anyBad ? "WRONG" : "ok");
    }
    if (anyBad) {
      chorus_comm_destroy(comm);
      return 2;
    }
  }
  free(buf);
  chorus_comm_destroy(comm);
  return 0;
}
