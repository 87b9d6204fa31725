#include "bench.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace chorus::bench {

void printLaunch(const LaunchInfo& launch) {
  // Values with spaces ("Open MPI") are quoted so the line splits into key=value words.
  auto word = [](const std::string& v) {
    return v.find(' ') == std::string::npos ? v : "\"" + v + "\"";
  };
  std::printf(
      "# launch: launcher=%s rank=%d size=%d local_rank=%d local_size=%d store=%s "
      "store_from=%s\n",
      word(launch.launcher).c_str(), launch.rank, launch.size, launch.localRank, launch.localSize,
      word(launch.store).c_str(), word(launch.storeFrom).c_str());
}

void printTable(const Config& cfg, int n, const std::string& algo, const std::vector<Row>& rows,
                const BoundInfo& bound) {
  std::printf(
      "# chorus-bench op=%s ranks=%d dtype=%s redop=%s algo=%s iters=%d warmup=%d%s\n",
      cfg.op.c_str(), n, std::string(toString(cfg.dtype)).c_str(),
      std::string(toString(cfg.redop)).c_str(), algo.c_str(), cfg.iters, cfg.warmup,
      cfg.wire == WireFormat::kNative ? "" : (" wire=" + std::string(toString(cfg.wire))).c_str());
  const bool b = bound.enabled;
  if (b) {
    std::printf(
        "# bound: cores=%d ranks_on_host=%d scale=%g; bound = 2 / ((1/R_reduce + "
        "1/R_copy) * scale), single-core rates measured by rank 0\n",
        bound.cores, bound.ranksOnHost, bound.scale);
  }
  std::printf("%12s %12s %6s %6s %12s %10s %10s %8s", "size(B)", "count", "type", "redop",
              "time(us)", "algbw", "busbw", "#wrong");
  if (b) std::printf(" %10s %7s", "bound", "%bound");
  // cpu comes after algo, so that the columns before it keep their numbers for scripts.
  std::printf("  %-16s %9s\n", "algo", "cpu");
  std::printf("%12s %12s %6s %6s %12s %10s %10s %8s", "", "", "", "", "", "(GB/s)", "(GB/s)", "");
  if (b) std::printf(" %10s %7s", "(GB/s)", "");
  std::printf("  %-16s %9s\n", "", "(ns/B)");
  for (const Row& r : rows) {
    std::printf("%12zu %12zu %6s %6s %12.1f %10.3f %10.3f %8s", r.bytes, r.count,
                std::string(toString(cfg.dtype)).c_str(), std::string(toString(cfg.redop)).c_str(),
                r.timeUs, r.algbw, r.busbw, cfg.check ? std::to_string(r.wrong).c_str() : "N/A");
    if (b) {
      if (r.bound > 0) {
        std::printf(" %10.3f %6.1f%%", r.bound, 100.0 * r.busbw / r.bound);
      } else {
        std::printf(" %10s %7s", "N/A", "N/A");
      }
    }
    std::printf("  %-16s %9.3f\n", r.algo.c_str(), r.cpuNsPerByte);
  }
  std::fflush(stdout);
}

void writeJson(const Config& cfg, int n, const std::string& algo, const std::vector<Row>& rows,
               const BoundInfo& bound) {
  std::ofstream f(cfg.jsonPath);
  if (!f) throw std::runtime_error("cannot write " + cfg.jsonPath);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  f << "{\n  \"system\": \"chorus\",\n  \"op\": \"" << cfg.op << "\",\n  \"dtype\": \""
    << toString(cfg.dtype) << "\",\n  \"redop\": \"" << toString(cfg.redop)
    << "\",\n  \"world_size\": " << n << ",\n  \"algo\": \"" << algo << "\",\n  \"host\": \""
    << host << "\",\n  \"iters\": " << cfg.iters << ",\n  \"warmup\": " << cfg.warmup
    << ",\n  \"check\": " << (cfg.check ? "true" : "false") << ",\n  \"wire\": \""
    << toString(cfg.wire) << "\"";
  if (bound.enabled) {
    // Rates in GB/s (1e9 bytes of buffer per second), per size of the sweep.
    f << ",\n  \"bound\": {\"cores\": " << bound.cores
      << ", \"ranks_on_host\": " << bound.ranksOnHost << ", \"scale\": " << bound.scale
      << ", \"reps\": " << cfg.boundReps
      << ", \"formula\": \"bound = 2 / ((1/r_reduce + 1/r_copy) * scale), scale = max(1, "
         "ranks_on_host / cores); pct_bound = 100 * busbw / bound\", \"rates\": [";
    for (size_t i = 0; i < bound.rates.size(); ++i) {
      const BoundRates& r = bound.rates[i];
      f << (i ? "," : "") << "\n    {\"bytes\": " << r.bytes << ", \"r_copy\": " << r.copy
        << ", \"r_reduce\": " << r.reduce << "}";
    }
    f << "\n  ]}";
  }
  f << ",\n  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    f << (i ? "," : "") << "\n    {\"bytes\": " << r.bytes << ", \"count\": " << r.count
      << ", \"time_us\": " << r.timeUs << ", \"trimmed_mean_us\": " << r.trimmedMeanUs
      << ", \"algbw\": " << r.algbw << ", \"busbw\": " << r.busbw << ", \"wrong\": " << r.wrong
      << ", \"algo\": \"" << r.algo << "\""
      << ", \"cpu_ns_per_byte\": " << r.cpuNsPerByte;
    if (bound.enabled) {
      f << ", \"bound\": " << r.bound
        << ", \"pct_bound\": " << (r.bound > 0 ? 100.0 * r.busbw / r.bound : 0.0);
    }
    f << "}";
  }
  f << "\n  ]\n}\n";
}

}  // namespace chorus::bench
