// chorus-sim's sweep (sweep.h): the virtual world from the settings, then each size and
// algorithm run on it, printed, and written as CSV / PNG.
#include "sweep.h"

#include "algo/collectives.h"
#include "algo/select.h"
#include "reduce/internal_types.h"
#include "sim/virtual_world.h"

#include <chorus/error.hpp>

#include "common/parse_bytes.h"
#include "heap_budget.h"
#include "plot.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>

namespace chorus::sim_tool {
namespace {

using tools::parseBytes;

std::string human(size_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf),
                v == static_cast<double>(static_cast<long long>(v)) ? "%.0f %s" : "%.1f %s", v,
                units[u]);
  return buf;
}

// The all-reduce algorithms, as the selector lists them.
std::vector<AlgorithmId> allReduceAlgorithms() {
  return algo::algorithmsFor(CollectiveKind::kAllReduce);
}

struct Row {
  size_t bytes = 0;
  std::string algo;
  bool chosen = false;  // what chooseAlgorithm picks at this size
  bool ok = false;
  double seconds = 0, algbw = 0, busbw = 0;
  uint64_t messages = 0;
  double wall = 0;
  size_t peakHeap = 0;
  std::string note;
};

sim::WorldConfig worldConfig(const Settings& s) {
  const int n = s.hosts * s.perHost;
  sim::WorldConfig cfg;
  cfg.size = n;
  cfg.payload = sim::Payload::kDry;
  for (int r = 0; r < n; ++r) cfg.hostOf.push_back(r / s.perHost);
  cfg.network.netAlpha = s.netAlphaUs * 1e-6;
  cfg.network.netBeta = 1.0 / (s.netGBps * 1e9);
  cfg.network.oversubscription = s.oversub;
  cfg.network.shmAlpha = s.shmAlphaUs * 1e-6;
  cfg.network.shmBeta = 1.0 / (s.shmGBps * 1e9);
  cfg.network.overhead = s.overheadUs * 1e-6;
  cfg.network.gamma = 1.0 / (s.reduceGBps * 1e9);
  cfg.network.copy = 1.0 / (s.copyGBps * 1e9);
  if (s.sharedCores > 0) {
    if (s.coreGBps <= 0) throw std::invalid_argument("--shared-cores needs --core-gbps");
    cfg.network.sharedCores = s.sharedCores;
    cfg.network.netCoreTime = 1.0 / (s.coreGBps * 1e9);
  }
  cfg.options.segmentBytes = parseBytes(s.segment);
  cfg.options.tuning.ringBidirectionalBytes = static_cast<double>(parseBytes(s.ringBothWays));
  // The selector sees the described network through its cost model's constants.
  cfg.options.tuning.net = LinkCost{cfg.network.netAlpha, cfg.network.netBeta * s.oversub};
  cfg.options.tuning.shm = LinkCost{cfg.network.shmAlpha, cfg.network.shmBeta};
  cfg.options.tuning.gamma.fill(cfg.network.gamma);
  cfg.wallLimitSeconds = s.runLimit;
  for (const std::string& st : s.stragglers) {
    const auto colon = st.find(':');
    if (colon == std::string::npos) throw std::invalid_argument("--straggler wants RANK:DELAY_US");
    const int r = std::stoi(st.substr(0, colon));
    if (r < 0 || r >= n) throw std::invalid_argument("--straggler rank out of range: " + st);
    if (cfg.startDelay.empty()) cfg.startDelay.assign(static_cast<size_t>(n), 0.0);
    cfg.startDelay[static_cast<size_t>(r)] = std::stod(st.substr(colon + 1)) * 1e-6;
  }
  return cfg;
}

// From --min-bytes to --max-bytes by --step-factor; the largest size always.
std::vector<size_t> sizesOf(const Settings& s) {
  const size_t lo = parseBytes(s.minBytes), hi = parseBytes(s.maxBytes);
  std::vector<size_t> sizes;
  for (double b = static_cast<double>(std::max<size_t>(lo, 1));
       b <= static_cast<double>(hi) * 1.0000001; b *= s.stepFactor) {
    sizes.push_back(static_cast<size_t>(b));
  }
  if (sizes.empty() || sizes.back() < hi) sizes.push_back(hi);
  return sizes;
}

// --algo's algorithms (every all-reduce algorithm by default), hierarchical only where there
// are layers.
std::vector<AlgorithmId> algorithmsOf(const Settings& s) {
  for (const std::string& name : s.algoNames) {
    bool known = false;
    for (AlgorithmId a : allReduceAlgorithms()) known = known || name == toString(a);
    if (!known) throw std::invalid_argument("unknown --algo " + name);
  }
  std::vector<AlgorithmId> algos;
  const bool layered = s.hosts > 1 && s.perHost > 1;
  for (AlgorithmId a : allReduceAlgorithms()) {
    if (a == AlgorithmId::kHierarchical && !layered) continue;
    if (!s.algoNames.empty() &&
        std::find(s.algoNames.begin(), s.algoNames.end(), toString(a)) == s.algoNames.end()) {
      continue;
    }
    algos.push_back(a);
  }
  return algos;
}

std::string title(const Settings& s) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "%d ranks = %d hosts x %d; net %g us + %g GB/s per NIC (oversubscription %g), "
                "shm %g us + %g GB/s; %g us per send; reduce %g GB/s, copy %g GB/s",
                s.hosts * s.perHost, s.hosts, s.perHost, s.netAlphaUs, s.netGBps, s.oversub,
                s.shmAlphaUs, s.shmGBps, s.overheadUs, s.reduceGBps, s.copyGBps);
  return buf;
}

void printHeader(const Settings& s, const sim::WorldConfig& cfg) {
  std::string shared;
  if (s.sharedCores > 0) {
    char buf[128];
    std::snprintf(buf, sizeof(buf), "; hosts share %d cores, %g GB/s of network work each",
                  s.sharedCores, s.coreGBps);
    shared = buf;
  }
  std::printf("# chorus-sim: %s%s%s\n", title(s).c_str(), shared.c_str(),
              cfg.startDelay.empty() ? "" : "; stragglers given");
  std::printf("# segment %s; * = what the cost model picks at that size\n",
              human(cfg.options.segmentBytes).c_str());
  std::printf("%12s  %-10s %14s %12s %12s %12s %9s\n", "size", "algorithm", "time(us)",
              "algbw(GB/s)", "busbw(GB/s)", "messages", "wall(s)");
}

void printRow(const Row& row, bool quiet) {
  if (row.ok) {
    std::printf("%12s %s%-10s %14.2f %12.3f %12.3f %12llu %9.2f\n", human(row.bytes).c_str(),
                row.chosen ? "*" : " ", row.algo.c_str(), row.seconds * 1e6, row.algbw, row.busbw,
                static_cast<unsigned long long>(row.messages), row.wall);
  } else {
    std::printf("%12s %s%-10s %s\n", human(row.bytes).c_str(), row.chosen ? "*" : " ",
                row.algo.c_str(), ("not simulated: " + row.note).c_str());
  }
  std::fflush(stdout);
  if (!quiet) {
    std::fprintf(stderr, "  [%s %s: %.2f s wall, peak heap %.2f GiB]\n", human(row.bytes).c_str(),
                 row.algo.c_str(), row.wall,
                 static_cast<double>(row.peakHeap) / static_cast<double>(1ull << 30));
  }
}

// The runs of one sweep on one virtual world, which starts over after a run that ran out of
// memory (the failed run's plans stay with its ranks).
class Sweep {
 public:
  Sweep(const Settings& s, const sim::WorldConfig& cfg) : s_(s), cfg_(cfg) {
    char gib[32];
    std::snprintf(gib, sizeof(gib), "%g", s.maxMemoryGiB);
    gib_ = gib;
    fresh();
  }

  void runAll(const std::vector<size_t>& sizes, const std::vector<AlgorithmId>& algos) {
    const int n = cfg_.size;
    for (size_t bytes : sizes) {
      const algo::Placement where{s_.hosts, s_.perHost, true, true};
      const AlgorithmId pick = algo::chooseAlgorithm(CollectiveKind::kAllReduce, bytes,
                                                     DataType::kF32, n, where, cfg_.options)
                                   .algo;
      for (AlgorithmId a : algos) {
        if (isRefused(a)) continue;
        if (auto row = runOne(bytes, a, a == pick, bytes == sizes.front())) {
          printRow(*row, s_.quiet);
          rows_.push_back(std::move(*row));
        }
      }
    }
    for (const std::string& r : refused_) {
      std::printf("# not an all-reduce algorithm: %s\n", r.c_str());
    }
  }

  const std::vector<Row>& rows() const { return rows_; }

 private:
  void fresh() {
    world_.reset();
    world_ = std::make_unique<sim::VirtualWorld>(cfg_);
  }

  bool isRefused(AlgorithmId a) const {
    return std::any_of(refused_.begin(), refused_.end(), [&](const std::string& r) {
      return r.rfind(std::string(toString(a)) + " (", 0) == 0;
    });
  }

  sim::RunResult simulateOnce(size_t bytes, AlgorithmId a) {
    sim::RunResult res;
    try {
      uint8_t* in = world_->untouchable(2 * bytes);
      OpDesc d;
      d.kind = CollectiveKind::kAllReduce;
      d.count = bytes;
      d.dtype = reduce::kSimBytes;
      d.algo = a;
      res = world_->run([&](int r) {
        const algo::Group& g = world_->group(r);
        g.tx->beginOp(d);
        algo::allReduceWith(g, a, in, in + bytes, bytes, reduce::kSimBytes, ReduceOp::kSum);
      });
    } catch (const std::bad_alloc&) {
      res.ok = false;
      res.error = "std::bad_alloc";
    }
    return res;
  }

  // The row of one run; none for an algorithm that refused this layout at the first size (named
  // once at the end, then left out).
  std::optional<Row> runOne(size_t bytes, AlgorithmId a, bool chosen, bool firstSize) {
    Row row;
    row.bytes = bytes;
    row.algo = toString(a);
    row.chosen = chosen;
    const auto t0 = std::chrono::steady_clock::now();
    resetHeapPeak();
    sim::RunResult res;
    // What an algorithm plans grows with the size: past the budget once, it stays past it.
    auto over = outOfMemoryAt_.find(a);
    if (over != outOfMemoryAt_.end()) {
      row.note = "needs more than --max-memory-gib " + gib_ + " GiB of simulator memory (at " +
                 human(over->second) + " already)";
      res.ok = false;
    } else {
      res = simulateOnce(bytes, a);
    }
    row.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    row.peakHeap = heapPeak();
    row.ok = res.ok;
    row.messages = res.messages;
    const int n = cfg_.size;
    if (res.ok) {
      row.seconds = res.seconds;
      row.algbw = res.seconds > 0 ? static_cast<double>(bytes) / res.seconds / 1e9 : 0;
      row.busbw = row.algbw * (n > 1 ? 2.0 * (n - 1) / n : 0.0);
    } else if (row.note.empty() && res.error.find("bad_alloc") != std::string::npos) {
      row.note = "needs more than --max-memory-gib " + gib_ + " GiB of simulator memory";
      outOfMemoryAt_.emplace(a, bytes);
      fresh();
    } else if (row.note.empty()) {
      row.note = res.error.substr(0, res.error.find('\n'));
      if (res.messages == 0 && firstSize) {
        // Every rank refused before sending anything: not an all-reduce algorithm (or not for
        // this layout).
        refused_.push_back(row.algo + " (" + row.note + ")");
        return std::nullopt;
      }
    }
    return row;
  }

  const Settings& s_;
  const sim::WorldConfig& cfg_;
  std::string gib_;
  std::unique_ptr<sim::VirtualWorld> world_;
  std::vector<Row> rows_;
  std::map<AlgorithmId, size_t> outOfMemoryAt_;  // algorithm -> first size over the budget
  std::vector<std::string> refused_;             // "name (why)"
};

void writeCsvAndPlot(const Settings& s, const std::vector<Row>& rows) {
  if (s.csvPath.empty() && s.pngPath.empty()) return;
  const std::string path = s.csvPath.empty() ? s.pngPath + ".csv" : s.csvPath;
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  f << "bytes,algorithm,auto,status,seconds,algbw_gbps,busbw_gbps,messages,wall_s,ranks,"
       "hosts,note\n";
  for (const Row& r : rows) {
    std::string note = r.note;
    std::replace(note.begin(), note.end(), ',', ';');
    f << r.bytes << "," << r.algo << "," << (r.chosen ? 1 : 0) << "," << (r.ok ? "ok" : "skipped")
      << "," << r.seconds << "," << r.algbw << "," << r.busbw << "," << r.messages << "," << r.wall
      << "," << s.hosts * s.perHost << "," << s.hosts << "," << note << "\n";
  }
  f.close();
  if (!s.pngPath.empty()) {
    if (plot(path, s.pngPath, title(s))) std::printf("# plot: %s\n", s.pngPath.c_str());
    if (s.csvPath.empty()) std::remove(path.c_str());
  }
  if (!s.csvPath.empty()) std::printf("# csv: %s\n", s.csvPath.c_str());
}

}  // namespace

void simulate(const Settings& s) {
  const sim::WorldConfig cfg = worldConfig(s);
  const std::vector<size_t> sizes = sizesOf(s);
  setHeapLimit(static_cast<size_t>(s.maxMemoryGiB * (1ull << 30)));
  const std::vector<AlgorithmId> algos = algorithmsOf(s);
  printHeader(s, cfg);
  const auto wallStart = std::chrono::steady_clock::now();
  Sweep sweep(s, cfg);
  sweep.runAll(sizes, algos);
  std::printf("# total wall time %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count());
  writeCsvAndPlot(s, sweep.rows());
}

}  // namespace chorus::sim_tool
