#include "options.h"

#include <CLI/CLI.hpp>

#include "common/parse_bytes.h"
#include "common/tool_version.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>

namespace chorus::bench {
namespace {

const std::vector<std::string> kCollectives = {
    "allreduce", "reduce_scatter", "all_gather",   "broadcast",        "reduce",       "gather",
    "scatter",   "all_to_all",     "all_gather_v", "reduce_scatter_v", "all_to_all_v", "send_recv"};

const std::map<std::string, ReduceOp> kOps = {{"sum", ReduceOp::kSum},
                                              {"prod", ReduceOp::kProd},
                                              {"min", ReduceOp::kMin},
                                              {"max", ReduceOp::kMax},
                                              {"avg", ReduceOp::kAvg}};

// nccl-tests' names (float, half, ...), numpy's (float32, ...) and chorus's short ones (f32, ...).
DataType parseDatatype(const std::string& name) {
  static const std::map<std::string, DataType> names = {
      {"float", DataType::kF32},     {"float32", DataType::kF32}, {"f32", DataType::kF32},
      {"double", DataType::kF64},    {"float64", DataType::kF64}, {"f64", DataType::kF64},
      {"half", DataType::kF16},      {"float16", DataType::kF16}, {"f16", DataType::kF16},
      {"bfloat16", DataType::kBF16}, {"bf16", DataType::kBF16},   {"int8", DataType::kI8},
      {"char", DataType::kI8},       {"i8", DataType::kI8},       {"uint8", DataType::kU8},
      {"u8", DataType::kU8},         {"int32", DataType::kI32},   {"int", DataType::kI32},
      {"i32", DataType::kI32},       {"int64", DataType::kI64},   {"i64", DataType::kI64}};
  auto it = names.find(name);
  if (it != names.end()) return it->second;
  throw std::invalid_argument(
      "-d " + name +
      ": not a datatype Chorus has (float, double, half, bfloat16, int8, uint8, int32, int64; "
      "also f32 f64 f16 bf16 i8 u8 i32 i64)" +
      (name == "uint32" || name == "uint64" ? "; it has no unsigned 32- or 64-bit type" : "") +
      (name == "all" ? "; run one datatype per invocation" : ""));
}

// -g and -t: one device and one thread per process; more ranks are more processes.
void requireOne(const char* flag, int value) {
  if (value != 1) {
    throw std::invalid_argument(std::string(flag) + " " + std::to_string(value) +
                                ": each chorus-bench rank is one process with one thread and "
                                "one (CPU) device; start more ranks instead (chorus-run -n N)");
  }
}

}  // namespace

int parseCommandLine(int argc, char** argv, CommandLine& cl) {
  Config& cfg = cl.cfg;
  std::string op = cfg.op, datatype = "float", redop = "sum", minBytes = "8", maxBytes = "64M";
  int check = 1, inPlace = 1, gpus = 1, threads = 1;
  bool noCheck = false, cppApi = false;
  std::string wire = "native";
  CLI::App app{
      "chorus-bench: collective bandwidth and latency, as nccl-tests measures them (its common "
      "flags, datatype names and output format), run under chorus-run, mpirun, srun or torchrun",
      "chorus-bench"};
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", chorus::tools::versionText("chorus-bench"));
  app.add_option("--op", op,
                 "the collective: allreduce | reduce_scatter | all_gather | broadcast | reduce | "
                 "gather | scatter | all_to_all | all_gather_v | reduce_scatter_v | all_to_all_v "
                 "| send_recv (roots: 0; v-variants: uneven counts; all_to_all_v: equal counts; "
                 "send_recv: rank 2i streams messages to 2i + 1). A reduction op (sum, ...) "
                 "here is nccl-tests' --op, the same as -o");
  app.add_option("-o,--redop", redop, "reduction op: sum, prod, min, max, avg");
  app.add_option("-d,--datatype,--dtype", datatype,
                 "float double half bfloat16 int8 uint8 int32 int64 (or f32 f64 f16 bf16 i8 u8 "
                 "i32 i64)");
  app.add_option("-b,--minbytes,--min-bytes", minBytes, "smallest size (suffixes K, M, G)");
  app.add_option("-e,--maxbytes,--max-bytes", maxBytes, "largest size");
  app.add_option("-f,--stepfactor,--step-factor", cfg.stepFactor, "size multiplier between rows")
      ->check(CLI::Range(1.01, 1e6));
  app.add_option("-n,--iters", cfg.iters, "timed iterations per size")
      ->check(CLI::Range(1, 1000000));
  app.add_option("-w,--warmup_iters,--warmup", cfg.warmup, "untimed iterations per size")
      ->check(CLI::Range(0, 1000000));
  app.add_option("-c,--check", check, "check the results (#wrong): 1 or 0 (-c alone: 1)")
      ->expected(0, 1)
      ->default_str("1")
      ->check(CLI::Range(0, 1));
  app.add_flag("--no-check", noCheck, "the same as -c 0");
  app.add_option("--in-place", inPlace,
                 "also time the in-place form (0: out of place only, half the time; broadcast "
                 "has only the in-place form, which 0 keeps; send_recv and all_to_all_v have "
                 "only the out-of-place one)")
      ->check(CLI::Range(0, 1));
  app.add_flag("--chorus-columns", cfg.chorusColumns,
               "after nccl-tests' 13 columns, chorus's own: the algorithm chosen and the CPU time "
               "per byte summed over the ranks (with --bound, bound and %bound too); without "
               "it, rows have exactly nccl-tests' columns");
  app.add_option("-g,--ngpus", gpus, "devices per thread (nccl-tests): 1, the rank's CPUs");
  app.add_option("-t,--nthreads", threads, "threads per process (nccl-tests): 1");
  app.add_option("-T,--timeout", cl.timeoutSeconds,
                 "seconds (fractions too) a call may wait for a peer before it fails, as "
                 "CHORUS_TIMEOUT (0: CHORUS_TIMEOUT, else the library's default)")
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--algo", cl.algo,
                 "force algorithms, as CHORUS_ALGO: an all-reduce algorithm (ring rd rhd tree "
                 "oneshot twoshot hier) or collective=name,... (empty: the cost model chooses)");
  app.add_option("--calibrate", cl.calibrateTo,
                 "measure the cost model's constants (alpha, beta per link kind; gamma per dtype) "
                 "on this job's ranks, write them to this file for CHORUS_TUNING_FILE, and exit");
  app.add_option("--wire", wire, "all-reduce wire format: native bf16 fp16 int8 (f32 sum/avg)");
  app.add_option("--json", cfg.jsonPath, "also write the rows as JSON to this file");
  app.add_option("--api", cfg.api, "c: time the blocking C call; cpp: the C++ API's issue + wait")
      ->check(CLI::IsMember({"c", "cpp"}));
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (kOps.count(op)) {
      redop = op;  // nccl-tests' --op
      op = "allreduce";
    } else if (std::find(kCollectives.begin(), kCollectives.end(), op) == kCollectives.end()) {
      throw std::invalid_argument("--op " + op + ": not a collective (see --help)");
    }
    cfg.op = op;
    if (!kOps.count(redop)) {
      throw std::invalid_argument("-o " + redop + ": not one of sum, prod, min, max, avg");
    }
    cfg.redop = kOps.at(redop);
    cfg.dtype = parseDatatype(datatype);
    requireOne("-g", gpus);
    requireOne("-t", threads);
    cfg.check = check == 1 && !noCheck;
    cfg.inPlace = inPlace == 1;
    if (cppApi) cfg.api = "cpp";
    cfg.wire = parseWireFormat(wire);
    if (cfg.wire != WireFormat::kNative && cfg.op != "allreduce") {
      throw std::invalid_argument("--wire is for --op allreduce only");
    }
    cfg.minBytes = chorus::tools::parseBytes(minBytes);
    cfg.maxBytes = chorus::tools::parseBytes(maxBytes);
    if (cfg.minBytes == 0 || cfg.minBytes > cfg.maxBytes) {
      throw std::invalid_argument("need 0 < -b <= -e");
    }
    if (cfg.bound && cfg.op != "allreduce") {
      throw std::invalid_argument("--bound is defined for --op allreduce only");
    }
    if (cfg.bound) cfg.chorusColumns = true;  // its figures are columns of their own
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-bench: %s\n", e.what());
    return 2;
  }
  return -1;
}

}  // namespace chorus::bench
