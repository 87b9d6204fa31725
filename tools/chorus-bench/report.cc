#include "bench.h"

#include "common/json.h"

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

void writeJson(const Config& cfg, int n, const std::string& algo, const std::vector<Row>& rows,
               const BoundInfo& bound) {
  std::ofstream f(cfg.jsonPath);
  if (!f) throw std::runtime_error("cannot write " + cfg.jsonPath);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  // Strings go through json::quoted (escaped); numbers keep the stream's formatting.
  f << "{\n  \"system\": \"chorus\",\n  \"op\": " << json::quotedString(cfg.op)
    << ",\n  \"dtype\": " << json::quotedString(toString(cfg.dtype)) << ",\n  \"redop\": "
    << json::quotedString(reduces(cfg.op) ? std::string(toString(cfg.redop)) : std::string("none"))
    << ",\n  \"world_size\": " << n << ",\n  \"algo\": " << json::quotedString(algo)
    << ",\n  \"host\": " << json::quotedString(host) << ",\n  \"iters\": " << cfg.iters
    << ",\n  \"warmup\": " << cfg.warmup << ",\n  \"check\": " << (cfg.check ? "true" : "false")
    << ",\n  \"wire\": " << json::quotedString(toString(cfg.wire));
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
  // A row's fields are its out-of-place form (broadcast: its only, in-place, form); "in_place"
  // holds the in-place form's where there are both.
  f << ",\n  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    const FormResult& r = row.primary();
    f << (i ? "," : "") << "\n    {\"bytes\": " << row.bytes << ", \"count\": " << row.count
      << ", \"form\": \"" << (row.outOfPlace.measured ? "out_of_place" : "in_place") << "\""
      << ", \"time_us\": " << r.timeUs << ", \"trimmed_mean_us\": " << r.trimmedMeanUs
      << ", \"algbw\": " << r.algbw << ", \"busbw\": " << r.busbw << ", \"wrong\": " << r.wrong
      << ", \"algo\": " << json::quotedString(r.algo)
      << ", \"cpu_ns_per_byte\": " << r.cpuNsPerByte;
    if (bound.enabled) {
      f << ", \"bound\": " << row.bound
        << ", \"pct_bound\": " << (row.bound > 0 ? 100.0 * r.busbw / row.bound : 0.0);
    }
    if (row.outOfPlace.measured && row.inPlace.measured) {
      const FormResult& p = row.inPlace;
      f << ", \"in_place\": {\"time_us\": " << p.timeUs
        << ", \"trimmed_mean_us\": " << p.trimmedMeanUs << ", \"algbw\": " << p.algbw
        << ", \"busbw\": " << p.busbw << ", \"wrong\": " << p.wrong
        << ", \"algo\": " << json::quotedString(p.algo)
        << ", \"cpu_ns_per_byte\": " << p.cpuNsPerByte << "}";
    }
    f << "}";
  }
  f << "\n  ]\n}\n";
}

}  // namespace chorus::bench
