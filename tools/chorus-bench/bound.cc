// chorus-bench --bound: single-core memory rates of this machine and the all-reduce busbw bound
// they imply for ranks on one host (see bench.h and docs/performance-log.md).
#include "bench.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace chorus::bench {
namespace {

// One clone per instruction set, picked at load time. Not under ThreadSanitizer: the loader runs
// the clones' resolver before the sanitizer's runtime is set up, and the instrumented resolver
// crashed every start of the program.
#if defined(__SANITIZE_THREAD__)
#define CHORUS_BENCH_CLONES
#else
#define CHORUS_BENCH_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

// a[i] += b[i] over n floats, with vector extensions so that the loop is vectorised whatever the
// optimisation level; one clone per instruction set (like the library's own kernels, which
// dispatch at run time).
CHORUS_BENCH_CLONES void addF32(float* a, const float* b, size_t n) {
  typedef float V __attribute__((vector_size(32)));
  constexpr size_t kW = sizeof(V) / sizeof(float);
  size_t i = 0;
  for (; i + 2 * kW <= n; i += 2 * kW) {
    V x0, x1, y0, y1;
    std::memcpy(&x0, a + i, sizeof(V));
    std::memcpy(&x1, a + i + kW, sizeof(V));
    std::memcpy(&y0, b + i, sizeof(V));
    std::memcpy(&y1, b + i + kW, sizeof(V));
    x0 += y0;
    x1 += y1;
    std::memcpy(a + i, &x0, sizeof(V));
    std::memcpy(a + i + kW, &x1, sizeof(V));
  }
  for (; i < n; ++i) a[i] += b[i];
}

// Keeps the compiler from dropping or merging the work on p.
inline void clobber(void* p) { asm volatile("" : : "r"(p) : "memory"); }

// Median over `reps` samples of the rate (bytes / s) of body(), which processes `bytes` bytes.
// Each sample repeats body() enough times to last about 1 ms (at least once); one untimed
// calibration sample first warms caches and TLB.
template <typename F>
double medianRate(size_t bytes, int reps, F&& body) {
  using Clock = std::chrono::steady_clock;
  auto sample = [&](size_t m) {
    auto t0 = Clock::now();
    for (size_t k = 0; k < m; ++k) body();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  size_t m = 1;
  double t = sample(m);
  while (t < 2e-4 && m < (size_t{1} << 30)) {
    m *= 2;
    t = sample(m);
  }
  if (t < 1e-3) m = static_cast<size_t>(static_cast<double>(m) * 1e-3 / std::max(t, 1e-9)) + 1;
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    rates.push_back(static_cast<double>(bytes) * static_cast<double>(m) / sample(m));
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

int coresAvailable() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

int ranksOnThisHost(int worldSize) {
  // chorus-run, torchrun, mpirun, Hydra and srun each say it in their own variables.
  const int local = chorus::launchInfoFromEnv().localSize;
  return local > 0 ? local : worldSize;  // nothing says otherwise: every rank on this host
}

BoundInfo measureBound(const std::vector<size_t>& sizes, int worldSize, int reps) {
  BoundInfo info;
  info.enabled = true;
  info.cores = coresAvailable();
  info.ranksOnHost = ranksOnThisHost(worldSize);
  info.scale = std::max(1.0, static_cast<double>(info.ranksOnHost) / info.cores);
  size_t maxBytes = 0;
  for (size_t s : sizes) maxBytes = std::max(maxBytes, s);
  maxBytes = (maxBytes + 63) & ~size_t{63};
  // Reused buffers, allocated once at the largest size and touched before any timing.
  std::vector<float> a(maxBytes / sizeof(float) + 16, 0.0f), b(a.size(), 1e-3f);
  std::vector<uint8_t> src(maxBytes + 64, 1), dst(maxBytes + 64, 0);
  for (size_t s : sizes) {
    BoundRates r;
    r.bytes = s;
    r.copy = medianRate(s, reps,
                        [&] {
                          std::memcpy(dst.data(), src.data(), s);
                          clobber(dst.data());
                        }) /
             1e9;
    const size_t n = std::max<size_t>(1, s / sizeof(float));
    r.reduce = medianRate(s, reps,
                          [&] {
                            addF32(a.data(), b.data(), n);
                            clobber(a.data());
                          }) /
               1e9;
    info.rates.push_back(r);
  }
  return info;
}

double boundBusbw(const BoundInfo& info, size_t bytes) {
  if (!info.enabled) return 0;
  for (const BoundRates& r : info.rates) {
    if (r.bytes == bytes && r.copy > 0 && r.reduce > 0) {
      // busbw = S/t * 2(N-1)/N with t >= (N-1)/N * S * (1/R_reduce + 1/R_copy) * scale:
      // the (N-1)/N cancels.
      return 2.0 / ((1.0 / r.reduce + 1.0 / r.copy) * info.scale);
    }
  }
  return 0;
}

}  // namespace chorus::bench
