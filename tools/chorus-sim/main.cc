// chorus-sim: predicts All-Reduce times on a described network by running the real algorithm
// code, for every rank, over a virtual network in this one process (src/sim, dry mode: no payload
// is touched, so any world size and buffer size costs only the algorithms' bookkeeping).
//   chorus-sim --hosts 128 --ranks-per-host 8 --max-bytes 256M --csv out.csv --png out.png
// Beside it: heap_budget.cc holds every run within --max-memory-gib, plot.cc draws --png.
#include "algo/collectives.h"
#include "algo/select.h"
#include "reduce/internal_types.h"
#include "sim/virtual_world.h"

#include <chorus/error.hpp>

#include <CLI/CLI.hpp>

#include "common/parse_bytes.h"
#include "common/tool_version.h"
#include "heap_budget.h"
#include "plot.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <new>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace chorus;

using sim_tool::heapPeak;
using sim_tool::plot;
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

}  // namespace

int main(int argc, char** argv) {
  int hosts = 4, perHost = 8;
  double netAlphaUs = 5, netGBps = 12.5, shmAlphaUs = 1, shmGBps = 10, oversub = 1;
  double reduceGBps = 10, copyGBps = 10, overheadUs = 0.2, coreGBps = 0;
  int sharedCores = 0;
  std::vector<std::string> stragglers, algoNames;
  std::string minBytes = "8", maxBytes = "256M", segment = "512K", csvPath, pngPath;
  std::string ringBothWays = "0";
  double stepFactor = 4, maxMemoryGiB = 8, runLimit = 0;
  bool quiet = false;

  CLI::App app{
      "chorus-sim: predicted All-Reduce time per size and algorithm on a described network, from "
      "the real algorithm code run for every rank over a virtual network in this process (no "
      "data moves; see docs/simulation.md for the model and what it leaves out).\n"
      "Cost grows with the messages an algorithm sends and the plans it keeps per rank. "
      "Measured on a busy 2-core machine: N = 1024 (128 x 8) takes at most about 3 s per size "
      "and algorithm. N = 16384 (2048 x 8): rd about 1 s per size; rhd and tree up to about a "
      "minute at 256 MiB; hier about 2 s below 8 MiB, but from 8 MiB on (pipelined, with a ring "
      "of 2(H-1) steps across the hosts) it needs about 10 GB and many minutes (8 minutes at "
      "8 MiB on 1024 x 16 with 5 GB); the flat ring (every rank plans all 2(N-1) steps up front: "
      "about 80 GB) and oneshot/twoshot (N^2 messages) do not fit. Runs past --max-memory-gib "
      "are reported as not simulated, never estimated."};
  app.option_defaults()->always_capture_default();
  app.add_option("--hosts", hosts, "hosts")->check(CLI::Range(1, 1 << 20));
  app.add_option("--ranks-per-host", perHost, "ranks on each host")->check(CLI::Range(1, 1 << 16));
  app.add_option("--net-alpha-us", netAlphaUs, "latency of a message between hosts (us)");
  app.add_option("--net-gbps", netGBps,
                 "bandwidth of each host's NIC, each way, in GB/s (beta_net = 1/this); all the "
                 "host's ranks' messages go through it one after the other");
  app.add_option("--oversubscription", oversub,
                 "divides the bandwidth between hosts (a core oversubscribed F:1)")
      ->check(CLI::Range(1.0, 1e6));
  app.add_option("--shm-alpha-us", shmAlphaUs, "latency of a message within a host (us)");
  app.add_option("--shm-gbps", shmGBps,
                 "bandwidth of each rank's own link to the ranks of its host, GB/s");
  app.add_option("--overhead-us", overheadUs,
                 "CPU time a rank spends posting each send (LogP's o); without it, algorithms "
                 "that send thousands of messages per rank (oneshot, twoshot) look free at small "
                 "sizes");
  app.add_option("--shared-cores", sharedCores,
                 "cores that all hosts' network stacks share, as when the hosts are network "
                 "namespaces of one machine (the emulated cluster); 0: not modelled")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--core-gbps", coreGBps,
                 "with --shared-cores: GB/s of traffic between hosts that one core's network "
                 "stack work (send and receive sides together) keeps up with")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--reduce-gbps", reduceGBps, "reduction rate, GB/s of result (gamma = 1/this)");
  app.add_option("--copy-gbps", copyGBps, "local copy rate, GB/s");
  app.add_option("--straggler", stragglers,
                 "RANK:DELAY_US, that rank enters the collective DELAY_US late (repeatable)");
  app.add_option("-b,--min-bytes", minBytes, "smallest size (suffixes K, M, G)");
  app.add_option("-e,--max-bytes", maxBytes, "largest size");
  app.add_option("-f,--step-factor", stepFactor, "size multiplier between rows")
      ->check(CLI::Range(1.01, 1e6));
  app.add_option("--algo", algoNames,
                 "algorithms to run (default: every all-reduce algorithm that applies)");
  app.add_option("--segment-bytes", segment, "pipelining unit (CHORUS_SEGMENT_BYTES)");
  app.add_option("--ring-bidir-bytes", ringBothWays,
                 "ring all-reduces from this size run both ways (CHORUS_RING_BIDIR_BYTES; "
                 "0: never)");
  app.add_option("--csv", csvPath, "write the rows as CSV");
  app.add_option("--png", pngPath,
                 "plot time against size per algorithm (needs /usr/bin/python3 with matplotlib; "
                 "skipped with a message otherwise)");
  app.add_option("--max-memory-gib", maxMemoryGiB,
                 "heap the simulation may use; a run that needs more is reported, not run");
  app.add_option("--run-limit-s", runLimit,
                 "wall-clock seconds per run before it is given up (0: none)");
  app.add_flag("-q,--quiet", quiet, "no progress lines on stderr");
  app.set_version_flag("--version", chorus::tools::versionText("chorus-sim"));
  CLI11_PARSE(app, argc, argv);

  try {
    const int n = hosts * perHost;
    sim::WorldConfig cfg;
    cfg.size = n;
    cfg.payload = sim::Payload::kDry;
    for (int r = 0; r < n; ++r) cfg.hostOf.push_back(r / perHost);
    cfg.network.netAlpha = netAlphaUs * 1e-6;
    cfg.network.netBeta = 1.0 / (netGBps * 1e9);
    cfg.network.oversubscription = oversub;
    cfg.network.shmAlpha = shmAlphaUs * 1e-6;
    cfg.network.shmBeta = 1.0 / (shmGBps * 1e9);
    cfg.network.overhead = overheadUs * 1e-6;
    cfg.network.gamma = 1.0 / (reduceGBps * 1e9);
    cfg.network.copy = 1.0 / (copyGBps * 1e9);
    if (sharedCores > 0) {
      if (coreGBps <= 0) throw std::invalid_argument("--shared-cores needs --core-gbps");
      cfg.network.sharedCores = sharedCores;
      cfg.network.netCoreTime = 1.0 / (coreGBps * 1e9);
    }
    cfg.options.segmentBytes = parseBytes(segment);
    cfg.options.tuning.ringBidirectionalBytes = static_cast<double>(parseBytes(ringBothWays));
    // The selector sees the described network through its cost model's constants.
    cfg.options.tuning.net = LinkCost{cfg.network.netAlpha, cfg.network.netBeta * oversub};
    cfg.options.tuning.shm = LinkCost{cfg.network.shmAlpha, cfg.network.shmBeta};
    cfg.options.tuning.gamma.fill(cfg.network.gamma);
    cfg.wallLimitSeconds = runLimit;
    for (const std::string& s : stragglers) {
      const auto colon = s.find(':');
      if (colon == std::string::npos)
        throw std::invalid_argument("--straggler wants RANK:DELAY_US");
      const int r = std::stoi(s.substr(0, colon));
      if (r < 0 || r >= n) throw std::invalid_argument("--straggler rank out of range: " + s);
      if (cfg.startDelay.empty()) cfg.startDelay.assign(static_cast<size_t>(n), 0.0);
      cfg.startDelay[static_cast<size_t>(r)] = std::stod(s.substr(colon + 1)) * 1e-6;
    }
    const size_t lo = parseBytes(minBytes), hi = parseBytes(maxBytes);
    std::vector<size_t> sizes;
    for (double b = static_cast<double>(std::max<size_t>(lo, 1));
         b <= static_cast<double>(hi) * 1.0000001; b *= stepFactor) {
      sizes.push_back(static_cast<size_t>(b));
    }
    if (sizes.empty() || sizes.back() < hi) sizes.push_back(hi);  // the largest size, always
    sim_tool::setHeapLimit(static_cast<size_t>(maxMemoryGiB * (1ull << 30)));

    std::vector<AlgorithmId> algos;
    const bool layered = hosts > 1 && perHost > 1;
    for (AlgorithmId a : allReduceAlgorithms()) {
      if (a == AlgorithmId::kHierarchical && !layered) continue;
      if (!algoNames.empty() &&
          std::find(algoNames.begin(), algoNames.end(), toString(a)) == algoNames.end()) {
        continue;
      }
      algos.push_back(a);
    }
    for (const std::string& name : algoNames) {
      bool known = false;
      for (AlgorithmId a : allReduceAlgorithms()) known = known || name == toString(a);
      if (!known) throw std::invalid_argument("unknown --algo " + name);
    }

    char title[512];
    std::snprintf(title, sizeof(title),
                  "%d ranks = %d hosts x %d; net %g us + %g GB/s per NIC (oversubscription %g), "
                  "shm %g us + %g GB/s; %g us per send; reduce %g GB/s, copy %g GB/s",
                  n, hosts, perHost, netAlphaUs, netGBps, oversub, shmAlphaUs, shmGBps, overheadUs,
                  reduceGBps, copyGBps);
    std::string shared;
    if (sharedCores > 0) {
      char buf[128];
      std::snprintf(buf, sizeof(buf), "; hosts share %d cores, %g GB/s of network work each",
                    sharedCores, coreGBps);
      shared = buf;
    }
    std::printf("# chorus-sim: %s%s%s\n", title, shared.c_str(),
                cfg.startDelay.empty() ? "" : "; stragglers given");
    std::printf("# segment %s; * = what the cost model picks at that size\n",
                human(cfg.options.segmentBytes).c_str());

    const auto wallStart = std::chrono::steady_clock::now();
    std::vector<Row> rows;
    std::map<AlgorithmId, size_t> outOfMemoryAt;  // algorithm -> first size over the budget
    std::vector<std::string> refused;             // "name (why)"
    char gibText[32];
    std::snprintf(gibText, sizeof(gibText), "%g", maxMemoryGiB);
    const std::string gib = gibText;
    std::unique_ptr<sim::VirtualWorld> world;
    auto fresh = [&] {
      world.reset();
      world = std::make_unique<sim::VirtualWorld>(cfg);
    };
    fresh();
    std::printf("%12s  %-10s %14s %12s %12s %12s %9s\n", "size", "algorithm", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "messages", "wall(s)");
    for (size_t bytes : sizes) {
      const algo::Placement where{hosts, perHost, true, true};
      const AlgorithmId pick = algo::chooseAlgorithm(CollectiveKind::kAllReduce, bytes,
                                                     DataType::kF32, n, where, cfg.options)
                                   .algo;
      for (AlgorithmId a : algos) {
        if (std::any_of(refused.begin(), refused.end(), [&](const std::string& r) {
              return r.rfind(std::string(toString(a)) + " (", 0) == 0;
            })) {
          continue;
        }
        Row row;
        row.bytes = bytes;
        row.algo = toString(a);
        row.chosen = a == pick;
        const auto t0 = std::chrono::steady_clock::now();
        sim_tool::resetHeapPeak();
        sim::RunResult res;
        // What an algorithm plans grows with the size: past the budget once, it stays past it.
        auto over = outOfMemoryAt.find(a);
        if (over != outOfMemoryAt.end()) {
          row.note = "needs more than --max-memory-gib " + gib + " GiB of simulator memory (at " +
                     human(over->second) + " already)";
          res.ok = false;
        } else {
          try {
            uint8_t* in = world->untouchable(2 * bytes);
            OpDesc d;
            d.kind = CollectiveKind::kAllReduce;
            d.count = bytes;
            d.dtype = reduce::kSimBytes;
            d.algo = a;
            res = world->run([&](int r) {
              const algo::Group& g = world->group(r);
              g.tx->beginOp(d);
              algo::allReduceWith(g, a, in, in + bytes, bytes, reduce::kSimBytes, ReduceOp::kSum);
            });
          } catch (const std::bad_alloc&) {
            res.ok = false;
            res.error = "std::bad_alloc";
          }
        }
        row.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        row.peakHeap = heapPeak();
        row.ok = res.ok;
        row.messages = res.messages;
        if (res.ok) {
          row.seconds = res.seconds;
          row.algbw = res.seconds > 0 ? static_cast<double>(bytes) / res.seconds / 1e9 : 0;
          row.busbw = row.algbw * (n > 1 ? 2.0 * (n - 1) / n : 0.0);
        } else if (row.note.empty() && res.error.find("bad_alloc") != std::string::npos) {
          row.note = "needs more than --max-memory-gib " + gib + " GiB of simulator memory";
          outOfMemoryAt.emplace(a, bytes);
          fresh();  // scratch plans of the failed run stay with the ranks: start over
        } else if (row.note.empty()) {
          row.note = res.error.substr(0, res.error.find('\n'));
          if (res.messages == 0 && bytes == sizes.front()) {
            // Every rank refused before sending anything: not an all-reduce algorithm (or not
            // for this layout). Named once, then left out.
            refused.push_back(row.algo + " (" + row.note + ")");
            continue;
          }
        }
        if (row.ok) {
          std::printf("%12s %s%-10s %14.2f %12.3f %12.3f %12llu %9.2f\n", human(bytes).c_str(),
                      row.chosen ? "*" : " ", row.algo.c_str(), row.seconds * 1e6, row.algbw,
                      row.busbw, static_cast<unsigned long long>(row.messages), row.wall);
        } else {
          std::printf("%12s %s%-10s %s\n", human(bytes).c_str(), row.chosen ? "*" : " ",
                      row.algo.c_str(), ("not simulated: " + row.note).c_str());
        }
        std::fflush(stdout);
        if (!quiet) {
          std::fprintf(stderr, "  [%s %s: %.2f s wall, peak heap %.2f GiB]\n", human(bytes).c_str(),
                       row.algo.c_str(), row.wall,
                       static_cast<double>(row.peakHeap) / static_cast<double>(1ull << 30));
        }
        rows.push_back(row);
      }
    }
    for (const std::string& r : refused) {
      std::printf("# not an all-reduce algorithm: %s\n", r.c_str());
    }
    std::printf(
        "# total wall time %.1f s\n",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count());

    if (!csvPath.empty() || !pngPath.empty()) {
      const std::string path = csvPath.empty() ? pngPath + ".csv" : csvPath;
      std::ofstream f(path);
      if (!f) throw std::runtime_error("cannot write " + path);
      f << "bytes,algorithm,auto,status,seconds,algbw_gbps,busbw_gbps,messages,wall_s,ranks,"
           "hosts,note\n";
      for (const Row& r : rows) {
        std::string note = r.note;
        std::replace(note.begin(), note.end(), ',', ';');
        f << r.bytes << "," << r.algo << "," << (r.chosen ? 1 : 0) << ","
          << (r.ok ? "ok" : "skipped") << "," << r.seconds << "," << r.algbw << "," << r.busbw
          << "," << r.messages << "," << r.wall << "," << n << "," << hosts << "," << note << "\n";
      }
      f.close();
      if (!pngPath.empty()) {
        if (plot(path, pngPath, title)) std::printf("# plot: %s\n", pngPath.c_str());
        if (csvPath.empty()) std::remove(path.c_str());
      }
      if (!csvPath.empty()) std::printf("# csv: %s\n", csvPath.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-sim: %s\n", e.what());
    return 1;
  }
  return 0;
}
