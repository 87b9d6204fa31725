// chorus-bench: run under chorus-run (or mpirun/srun with CHORUS_STORE set).
//   chorus-run -n 4 -- chorus-bench --op allreduce --min-bytes 8 --max-bytes 64M
#include "bench.h"

#include <CLI/CLI.hpp>

#include "common/parse_bytes.h"
#include "common/tool_version.h"

#include <cstdio>
#include <map>

using chorus::tools::parseBytes;

int main(int argc, char** argv) {
  using namespace chorus;
  bench::Config cfg;
  std::string dtype = "f32", redop = "sum", minBytes = "8", maxBytes = "64M", algo, calibrateTo;
  bool noCheck = false;
  CLI::App app{"chorus-bench: collective bandwidth and latency, nccl-tests conventions"};
  app.add_option("--op", cfg.op,
                 "allreduce | reduce_scatter | all_gather | broadcast | reduce | gather | "
                 "scatter | all_to_all | all_gather_v | reduce_scatter_v | all_to_all_v | "
                 "send_recv (roots: 0; v-variants: uneven counts; all_to_all_v: equal counts; "
                 "send_recv: rank 2i streams messages to 2i + 1)")
      ->check(CLI::IsMember({"allreduce", "reduce_scatter", "all_gather", "broadcast", "reduce",
                             "gather", "scatter", "all_to_all", "all_gather_v", "reduce_scatter_v",
                             "all_to_all_v", "send_recv"}));
  app.add_option("--dtype", dtype, "f32 f64 f16 bf16 i8 u8 i32 i64");
  app.add_option("--redop", redop, "sum prod min max avg");
  app.add_option("-b,--min-bytes", minBytes, "smallest size (suffixes K, M, G)");
  app.add_option("-e,--max-bytes", maxBytes, "largest size");
  app.add_option("-f,--step-factor", cfg.stepFactor, "size multiplier between rows")
      ->check(CLI::Range(1.01, 1e6));
  app.add_option("-n,--iters", cfg.iters, "timed iterations per size")
      ->check(CLI::Range(1, 1000000));
  app.add_option("-w,--warmup", cfg.warmup, "untimed iterations per size")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--algo", algo,
                 "force algorithms, as CHORUS_ALGO: an all-reduce algorithm (ring rd rhd tree "
                 "oneshot twoshot hier) or collective=name,... (default: the cost model chooses)");
  app.add_option("--calibrate", calibrateTo,
                 "measure the cost model's constants (alpha, beta per link kind; gamma per dtype) "
                 "on this job's ranks, write them to this file for CHORUS_TUNING_FILE, and exit");
  std::string wire = "native";
  app.add_option("--wire", wire, "all-reduce wire format: native bf16 fp16 int8 (f32 sum/avg)");
  app.add_flag("--no-check", noCheck, "skip the correctness check (#wrong)");
  app.add_flag("-c,--check", cfg.check, "check results (default on)");
  app.add_option("--json", cfg.jsonPath, "also write the rows as JSON to this file");
  app.add_option("--api", cfg.api,
                 "c: time the blocking C call (default); cpp: the C++ API's issue + wait")
      ->check(CLI::IsMember({"c", "cpp"}));
  bool cppApi = false;
  app.add_flag("--nonblocking", cppApi, "the same as --api cpp (older name)");
  app.add_flag("--bound", cfg.bound,
               "all-reduce only: before the sweep, rank 0 measures single-core memcpy (R_copy) "
               "and f32 a[i] += b[i] (R_reduce) rates at every size of the sweep (bytes per "
               "second of buffer, reused warm buffers, median of --bound-reps) and adds the "
               "columns bound = 2 / ((1/R_reduce + 1/R_copy) * max(1, ranks on host / cores)) "
               "(the busbw at the least time (N-1)/N * S * (1/R_reduce + 1/R_copy) each rank "
               "needs to reduce and copy (N-1)/N of S bytes) and %bound = busbw / bound; ranks "
               "on host: CHORUS_LOCAL_SIZE, else the world size");
  app.add_flag("--registered", cfg.registered,
               "time the sweep on registered buffers (chorus_mem_alloc), which the ranks of a "
               "host read in place");
  app.add_option("--bound-reps", cfg.boundReps, "samples per size and kernel for --bound")
      ->check(CLI::Range(1, 1000));
  app.set_version_flag("--version", chorus::tools::versionText("chorus-bench"));
  CLI11_PARSE(app, argc, argv);
  cfg.check = !noCheck;
  if (cppApi) cfg.api = "cpp";

  const std::map<std::string, DataType> dtypes = {
      {"f32", DataType::kF32},   {"f64", DataType::kF64}, {"f16", DataType::kF16},
      {"bf16", DataType::kBF16}, {"i8", DataType::kI8},   {"u8", DataType::kU8},
      {"i32", DataType::kI32},   {"i64", DataType::kI64}};
  const std::map<std::string, ReduceOp> ops = {{"sum", ReduceOp::kSum},
                                               {"prod", ReduceOp::kProd},
                                               {"min", ReduceOp::kMin},
                                               {"max", ReduceOp::kMax},
                                               {"avg", ReduceOp::kAvg}};
  try {
    if (!dtypes.count(dtype)) throw std::invalid_argument("unknown --dtype " + dtype);
    if (!ops.count(redop)) throw std::invalid_argument("unknown --redop " + redop);
    cfg.dtype = dtypes.at(dtype);
    cfg.redop = ops.at(redop);
    cfg.wire = parseWireFormat(wire);
    if (cfg.wire != WireFormat::kNative && cfg.op != "allreduce") {
      throw std::invalid_argument("--wire is for --op allreduce only");
    }
    cfg.minBytes = parseBytes(minBytes);
    cfg.maxBytes = parseBytes(maxBytes);
    if (cfg.minBytes == 0 || cfg.minBytes > cfg.maxBytes) {
      throw std::invalid_argument("need 0 < --min-bytes <= --max-bytes");
    }
    if (cfg.bound && cfg.op != "allreduce") {
      throw std::invalid_argument("--bound is defined for --op allreduce only");
    }
    chorus_options options{};
    options.struct_size = sizeof(options);
    if (!algo.empty()) options.algorithm = algo.c_str();
    chorus_comm* c = nullptr;
    if (chorus_init_from_env_with_options(&options, &c) != CHORUS_OK) {
      throw std::runtime_error(chorus_last_error(nullptr));
    }
    std::unique_ptr<chorus_comm, decltype(&chorus_destroy)> owned(c, &chorus_destroy);
    Communicator& comm = communicatorOf(c);
    if (!calibrateTo.empty()) {
      bench::calibrate(c, calibrateTo);
      return 0;
    }
    if (comm.rank() == 0) bench::printLaunch(chorus::launchInfoFromEnv());
    bench::BoundInfo bound;
    if (cfg.bound) {
      // Rank 0 measures while the others wait in the barrier (asleep after a short poll).
      if (comm.rank() == 0) {
        bound =
            bench::measureBound(bench::sweepBytes(cfg, comm.size()), comm.size(), cfg.boundReps);
      }
      if (chorus_barrier(c) != CHORUS_OK) throw std::runtime_error(chorus_last_error(c));
    }
    auto rows = bench::runSweep(c, comm, cfg);
    std::string used = toString(comm.options().algorithm);
    if (comm.rank() == 0) {
      for (auto& r : rows) r.bound = bench::boundBusbw(bound, r.bytes);
      bench::printTable(cfg, comm.size(), used, rows, bound);
      if (!cfg.jsonPath.empty()) bench::writeJson(cfg, comm.size(), used, rows, bound);
    }
    long wrong = 0;
    for (auto& r : rows) wrong += r.wrong;
    return wrong == 0 ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-bench: %s\n", e.what());
    return 1;
  }
}
