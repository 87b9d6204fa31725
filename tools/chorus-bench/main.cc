// chorus-bench: run under chorus-run (or mpirun/srun/torchrun with CHORUS_STORE set), with
// nccl-tests' flags and output format:
//   chorus-run -n 4 -- chorus-bench -b 8 -e 64M -f 2 -d float -o sum -c 1
//   chorus-run -n 4 -- chorus-bench --op broadcast -b 8 -e 1M --json out.json
#include "bench.h"
#include "options.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

int main(int argc, char** argv) {
  using namespace chorus;
  bench::CommandLine cl;
  if (int status = bench::parseCommandLine(argc, argv, cl); status >= 0) return status;
  const bench::Config& cfg = cl.cfg;
  try {
    chorus_options options{};
    options.struct_size = sizeof(options);
    if (!cl.algo.empty()) options.algorithm = cl.algo.c_str();
    if (cl.timeoutSeconds > 0) {
      options.timeout_ms = std::max(1LL, std::llround(cl.timeoutSeconds * 1000));
    }
    chorus_comm* c = nullptr;
    if (chorus_comm_init_from_env_with_options(&options, &c) != CHORUS_OK) {
      throw std::runtime_error(chorus_last_error(nullptr));
    }
    std::unique_ptr<chorus_comm, decltype(&chorus_comm_destroy)> owned(c, &chorus_comm_destroy);
    Communicator& comm = communicatorOf(c);
    if (!cl.calibrateTo.empty()) {
      bench::calibrate(c, cl.calibrateTo);
      return 0;
    }
    const bool printer = comm.rank() == 0;
    if (printer) bench::printLaunch(chorus::launchInfoFromEnv());
    const auto ranks = bench::describeRanks(c);
    bench::BoundInfo bound;
    if (cfg.bound) {
      // Rank 0 measures while the others wait in the barrier (asleep after a short poll).
      if (printer) {
        bound =
            bench::measureBound(bench::sweepBytes(cfg, comm.size()), comm.size(), cfg.boundReps);
      }
      if (chorus_barrier(c) != CHORUS_OK) throw std::runtime_error(chorus_last_error(c));
    }
    const std::string used = toString(comm.options().algorithm);
    if (printer) bench::printHeader(cfg, comm.size(), used, ranks, bound);
    auto rows = bench::runSweep(c, comm, cfg, [&](const bench::Row& r) {
      if (!printer) return;
      bench::Row shown = r;
      shown.bound = bench::boundBusbw(bound, r.bytes);
      bench::printRow(cfg, shown, bound);
    });
    for (auto& r : rows) r.bound = bench::boundBusbw(bound, r.bytes);
    if (printer) {
      bench::printFooter(cfg, rows);
      if (!cfg.jsonPath.empty()) bench::writeJson(cfg, comm.size(), used, rows, bound);
    }
    long wrong = 0;
    for (auto& r : rows) wrong += r.outOfPlace.wrong + r.inPlace.wrong;
    return wrong == 0 ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-bench: %s\n", e.what());
    return 1;
  }
}
