#include "bench.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace chorus::bench {

void printTable(const Config& cfg, int n, const std::string& algo, const std::vector<Row>& rows) {
  std::printf("# chorus-bench op=%s ranks=%d dtype=%s redop=%s algo=%s iters=%d warmup=%d\n",
              cfg.op.c_str(), n, std::string(toString(cfg.dtype)).c_str(),
              std::string(toString(cfg.redop)).c_str(), algo.c_str(), cfg.iters, cfg.warmup);
  std::printf("%12s %12s %6s %6s %12s %10s %10s %8s  %s\n", "size(B)", "count", "type", "redop",
              "time(us)", "algbw", "busbw", "#wrong", "algo");
  std::printf("%12s %12s %6s %6s %12s %10s %10s %8s\n", "", "", "", "", "", "(GB/s)", "(GB/s)", "");
  for (const Row& r : rows) {
    std::printf("%12zu %12zu %6s %6s %12.1f %10.3f %10.3f %8s  %s\n", r.bytes, r.count,
                std::string(toString(cfg.dtype)).c_str(), std::string(toString(cfg.redop)).c_str(),
                r.timeUs, r.algbw, r.busbw, cfg.check ? std::to_string(r.wrong).c_str() : "N/A",
                r.algo.c_str());
  }
  std::fflush(stdout);
}

void writeJson(const Config& cfg, int n, const std::string& algo, const std::vector<Row>& rows) {
  std::ofstream f(cfg.jsonPath);
  if (!f) throw std::runtime_error("cannot write " + cfg.jsonPath);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  f << "{\n  \"system\": \"chorus\",\n  \"op\": \"" << cfg.op << "\",\n  \"dtype\": \""
    << toString(cfg.dtype) << "\",\n  \"redop\": \"" << toString(cfg.redop)
    << "\",\n  \"world_size\": " << n << ",\n  \"algo\": \"" << algo << "\",\n  \"host\": \""
    << host << "\",\n  \"iters\": " << cfg.iters << ",\n  \"warmup\": " << cfg.warmup
    << ",\n  \"check\": " << (cfg.check ? "true" : "false") << ",\n  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    f << (i ? "," : "") << "\n    {\"bytes\": " << r.bytes << ", \"count\": " << r.count
      << ", \"time_us\": " << r.timeUs << ", \"algbw\": " << r.algbw << ", \"busbw\": " << r.busbw
      << ", \"wrong\": " << r.wrong << ", \"algo\": \"" << r.algo << "\"}";
  }
  f << "\n  ]\n}\n";
}

}  // namespace chorus::bench
