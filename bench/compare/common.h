// Shared harness for the peer benchmarks (gloo_bench, mpi_bench): the same sweep, row, table and
// JSON definitions as tools/chorus-bench (bench.h, bench_run.cc, report.cc), restricted to
// All-Reduce, f32, sum. Not part of the main build; see bench/compare/README.md.
//
// Definitions copied from chorus-bench:
//   * sizes: b = min; b <= max * 1.0000001; b *= step; count = floor(b / 4) (at least 1),
//     bytes = count * 4 (the whole buffer, nccl-tests convention for all-reduce);
//   * buffers allocated once at max + 4 bytes and zero-filled (touched) before any timing;
//   * per size: `warmup` untimed calls, then `iters` timed calls, each timed on its own with
//     steady_clock around issue+wait; the per-iteration times are reduced with MAX over the ranks
//     (slowest rank per iteration), sorted, and the median (element iters/2) is the row's time;
//   * algbw = bytes / time (GB/s, 1e9), busbw = algbw * 2(N-1)/N;
//   * cpu_ns_per_byte: CPU time of the whole process (user + system, every thread: getrusage
//     RUSAGE_SELF) over the timed calls, summed over the ranks, divided by iters * bytes;
//   * #wrong: after timing, one more call with input[i] = (i + rank) % 3 + 1, every output
//     element compared with the exact sum, the count of mismatches summed over the ranks.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../tools/common/parse_bytes.h"

namespace compare {

struct Config {
  size_t minBytes = 8;
  size_t maxBytes = 64u << 20;
  double stepFactor = 2;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  std::string jsonPath;
  std::string system;  // "gloo-ring-chunked", "openmpi-tcp", ...
  std::string algo;    // free-form: what the peer ran
  std::string notes;   // free-form: in-place or not, transport, ...
};

struct Row {
  size_t bytes = 0;
  size_t count = 0;
  double timeUs = 0;
  double algbw = 0;
  double busbw = 0;
  long wrong = 0;
  double cpuNsPerByte = 0;  // CPU time of the timed calls, all ranks, per byte all-reduced
};

// CPU time of the whole process (every thread, user + system) so far, in nanoseconds.
inline int64_t processCpuNs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto ns = [](const timeval& t) { return int64_t{t.tv_sec} * 1000000000 + t.tv_usec * 1000; };
  return ns(u.ru_utime) + ns(u.ru_stime);
}

using chorus::tools::parseBytes;  // the same size syntax as chorus-bench

// Parses the CLI subset shared with chorus-bench. `extra` gets first refusal on every argument:
// it returns how many argv entries it consumed (0: not its option).
inline void parseArgs(int argc, char** argv, Config& cfg,
                      const std::function<int(int, char**)>& extra) {
  auto need = [&](int i) -> std::string {
    if (i + 1 >= argc) throw std::invalid_argument(std::string("missing value for ") + argv[i]);
    return argv[i + 1];
  };
  for (int i = 1; i < argc;) {
    std::string a = argv[i];
    if (int used = extra ? extra(i, argv) : 0; used > 0) {
      i += used;
    } else if (a == "-b" || a == "--min-bytes") {
      cfg.minBytes = parseBytes(need(i)), i += 2;
    } else if (a == "-e" || a == "--max-bytes") {
      cfg.maxBytes = parseBytes(need(i)), i += 2;
    } else if (a == "-f" || a == "--step-factor") {
      cfg.stepFactor = std::stod(need(i)), i += 2;
    } else if (a == "-n" || a == "--iters") {
      cfg.iters = std::stoi(need(i)), i += 2;
    } else if (a == "-w" || a == "--warmup") {
      cfg.warmup = std::stoi(need(i)), i += 2;
    } else if (a == "--json") {
      cfg.jsonPath = need(i), i += 2;
    } else if (a == "--no-check") {
      cfg.check = false, i += 1;
    } else if (a == "-c" || a == "--check") {
      cfg.check = true, i += 1;
    } else if (a == "--op" || a == "--dtype" || a == "--redop") {
      std::string v = need(i);
      if (v != "allreduce" && v != "f32" && v != "sum") {
        throw std::invalid_argument("only --op allreduce --dtype f32 --redop sum are supported");
      }
      i += 2;
    } else {
      throw std::invalid_argument("unknown argument '" + a + "'");
    }
  }
  if (cfg.minBytes == 0 || cfg.minBytes > cfg.maxBytes) {
    throw std::invalid_argument("need 0 < --min-bytes <= --max-bytes");
  }
  if (cfg.stepFactor < 1.01) throw std::invalid_argument("--step-factor must be >= 1.01");
  if (cfg.iters < 1 || cfg.warmup < 0) throw std::invalid_argument("bad --iters/--warmup");
}

// What a peer provides to the sweep. `in` and `out` are the preallocated, touched buffers.
struct Backend {
  int rank = 0, size = 1;
  // In-place peers reduce `out` into itself: the check's input goes into `out`.
  bool inPlace = false;
  // Called once per size, outside timing (e.g. to build a Gloo algorithm object).
  std::function<void(float* in, float* out, size_t count)> prepare;
  // One complete all-reduce of `count` elements, blocking; the result ends up in `out`.
  std::function<void(float* in, float* out, size_t count)> allReduce;
  // Collective helpers for the harness itself (not timed).
  std::function<void(std::vector<double>&)> maxOverRanks;
  std::function<int64_t(int64_t)> sumOverRanks;
  // Called once per size after the row is done (e.g. to free the Gloo algorithm object).
  std::function<void()> release;
};

inline std::vector<Row> runSweep(Backend& be, const Config& cfg) {
  const int n = be.size, r = be.rank;
  const size_t es = sizeof(float);
  std::vector<float> in(cfg.maxBytes / es + 1), out(cfg.maxBytes / es + 1);
  std::fill(in.begin(), in.end(), 0.0f);
  std::fill(out.begin(), out.end(), 0.0f);

  std::vector<Row> rows;
  for (double b = static_cast<double>(cfg.minBytes);
       b <= static_cast<double>(cfg.maxBytes) * 1.0000001; b *= cfg.stepFactor) {
    Row row;
    size_t total = static_cast<size_t>(b) / es;
    if (total == 0) total = 1;
    row.count = total;
    row.bytes = total * es;
    if (row.bytes > cfg.maxBytes + es) break;

    if (be.prepare) be.prepare(in.data(), out.data(), row.count);
    for (int i = 0; i < cfg.warmup; ++i) be.allReduce(in.data(), out.data(), row.count);
    std::vector<double> times(static_cast<size_t>(cfg.iters));
    const int64_t cpu0 = processCpuNs();
    for (int i = 0; i < cfg.iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      be.allReduce(in.data(), out.data(), row.count);
      times[static_cast<size_t>(i)] =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    }
    const int64_t cpuNs = be.sumOverRanks(processCpuNs() - cpu0);
    row.cpuNsPerByte = static_cast<double>(cpuNs) / (static_cast<double>(cfg.iters) * row.bytes);
    be.maxOverRanks(times);
    std::sort(times.begin(), times.end());
    row.timeUs = times[times.size() / 2];
    row.algbw = static_cast<double>(row.bytes) / (row.timeUs * 1e-6) / 1e9;
    row.busbw = row.algbw * 2.0 * (n - 1) / n;

    if (cfg.check) {
      std::vector<float>& src = be.inPlace ? out : in;
      for (size_t i = 0; i < total; ++i) {
        src[i] = static_cast<float>((i + static_cast<size_t>(r)) % 3 + 1);
      }
      be.allReduce(in.data(), out.data(), row.count);
      long wrong = 0;
      for (size_t i = 0; i < row.count; ++i) {
        double want = 0;
        for (int q = 0; q < n; ++q)
          want += static_cast<double>((i + static_cast<size_t>(q)) % 3) + 1;
        wrong += static_cast<double>(out[i]) != want;
      }
      row.wrong = static_cast<long>(be.sumOverRanks(wrong));
      // Back to zeros. (chorus-bench leaves the small integers in `in`; for an in-place peer
      // the buffer now holds the sums, which would grow without bound over later rows. Values
      // do not change the speed of an f32 sum: no denormals either way.)
      std::fill(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(total), 0.0f);
      std::fill(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(total), 0.0f);
    }
    if (be.release) be.release();
    rows.push_back(row);
  }
  return rows;
}

inline void printTable(const Config& cfg, int n, const std::vector<Row>& rows) {
  std::printf("# %s op=allreduce ranks=%d dtype=f32 redop=sum algo=%s iters=%d warmup=%d\n",
              cfg.system.c_str(), n, cfg.algo.c_str(), cfg.iters, cfg.warmup);
  if (!cfg.notes.empty()) std::printf("# %s\n", cfg.notes.c_str());
  std::printf("%12s %12s %6s %6s %12s %10s %10s %8s %9s\n", "size(B)", "count", "type", "redop",
              "time(us)", "algbw", "busbw", "#wrong", "cpu");
  std::printf("%12s %12s %6s %6s %12s %10s %10s %8s %9s\n", "", "", "", "", "", "(GB/s)", "(GB/s)",
              "", "(ns/B)");
  for (const Row& r : rows) {
    std::printf("%12zu %12zu %6s %6s %12.1f %10.3f %10.3f %8s %9.3f\n", r.bytes, r.count, "f32",
                "sum", r.timeUs, r.algbw, r.busbw,
                cfg.check ? std::to_string(r.wrong).c_str() : "N/A", r.cpuNsPerByte);
  }
  std::fflush(stdout);
}

inline std::string jsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o;
}

// Same fields as chorus-bench's writeJson, plus "notes".
inline void writeJson(const Config& cfg, int n, const std::vector<Row>& rows) {
  std::ofstream f(cfg.jsonPath);
  if (!f) throw std::runtime_error("cannot write " + cfg.jsonPath);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  f << "{\n  \"system\": \"" << jsonEscape(cfg.system) << "\",\n  \"op\": \"allreduce\",\n"
    << "  \"dtype\": \"f32\",\n  \"redop\": \"sum\",\n  \"world_size\": " << n
    << ",\n  \"algo\": \"" << jsonEscape(cfg.algo) << "\",\n  \"host\": \"" << jsonEscape(host)
    << "\",\n  \"iters\": " << cfg.iters << ",\n  \"warmup\": " << cfg.warmup
    << ",\n  \"check\": " << (cfg.check ? "true" : "false") << ",\n  \"notes\": \""
    << jsonEscape(cfg.notes) << "\",\n  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    f << (i ? "," : "") << "\n    {\"bytes\": " << r.bytes << ", \"count\": " << r.count
      << ", \"time_us\": " << r.timeUs << ", \"algbw\": " << r.algbw << ", \"busbw\": " << r.busbw
      << ", \"wrong\": " << r.wrong << ", \"cpu_ns_per_byte\": " << r.cpuNsPerByte << "}";
  }
  f << "\n  ]\n}\n";
}

// Runs the sweep, prints and writes the rows on rank 0; returns the total #wrong (every rank
// gets the same value).
inline long runAndReport(Backend& be, const Config& cfg, int rank, int size) {
  auto rows = runSweep(be, cfg);
  if (rank == 0) {
    printTable(cfg, size, rows);
    if (!cfg.jsonPath.empty()) writeJson(cfg, size, rows);
  }
  long wrong = 0;
  for (auto& r : rows) wrong += r.wrong;
  return wrong;
}

}  // namespace compare
