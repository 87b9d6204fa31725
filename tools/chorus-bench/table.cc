// chorus-bench's table, in the format of nccl-tests, so that the scripts written for it read
// chorus-bench's output too (rows of exactly its thirteen columns: some scripts unpack them);
// chorus's own columns, on request, come after them.
#include "bench.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace chorus::bench {
namespace {

// One form's four columns: time (us), algbw, busbw (GB/s), #wrong; N/A where it was not run.
void printForm(const Config& cfg, const FormResult& f) {
  if (!f.measured) {
    std::printf("  %10s  %8s  %8s  %6s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  std::printf("  %10.2f  %8.3f  %8.3f  %6s", f.timeUs, f.algbw, f.busbw,
              cfg.check ? std::to_string(f.wrong).c_str() : "N/A");
}

}  // namespace

const char* ncclTypeName(DataType t) {
  switch (t) {
    case DataType::kF32:
      return "float";
    case DataType::kF64:
      return "double";
    case DataType::kF16:
      return "half";
    case DataType::kBF16:
      return "bfloat16";
    case DataType::kI8:
      return "int8";
    case DataType::kU8:
      return "uint8";
    case DataType::kI32:
      return "int32";
    case DataType::kI64:
      return "int64";
  }
  return "?";
}

bool reduces(const std::string& op) {
  return op == "allreduce" || op == "reduce_scatter" || op == "reduce" || op == "reduce_scatter_v";
}

int rootOf(const std::string& op) {
  return op == "broadcast" || op == "reduce" || op == "gather" || op == "scatter" ? 0 : -1;
}

std::vector<std::string> describeRanks(chorus_comm* c) {
  struct Record {
    int64_t pid;
    char host[56];
  };
  Record mine{};
  mine.pid = ::getpid();
  gethostname(mine.host, sizeof(mine.host) - 1);
  const int n = chorus_comm_size(c);
  std::vector<Record> all(static_cast<size_t>(n));
  if (chorus_all_gather(c, &mine, all.data(), sizeof(Record), CHORUS_DTYPE_U8) != CHORUS_OK) {
    throw std::runtime_error(chorus_last_error(c));
  }
  std::vector<std::string> lines;
  for (int r = 0; r < n; ++r) {
    char line[160];
    const Record& rec = all[static_cast<size_t>(r)];
    const std::string host(rec.host, strnlen(rec.host, sizeof(rec.host)));
    std::snprintf(line, sizeof(line), "#  Rank %2d Group  0 Pid %6lld on %10s device cpu", r,
                  static_cast<long long>(rec.pid), host.c_str());
    lines.emplace_back(line);
  }
  return lines;
}

void printHeader(const Config& cfg, int n, const std::string& algo,
                 const std::vector<std::string>& ranks, const BoundInfo& bound) {
  // nccl-tests' first line (one thread and one device per process here; no graphs), then ours.
  std::printf(
      "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %g(factor) warmup iters: %d iters: %d "
      "agg iters: 1 validation: %d graph: 0\n#\n",
      cfg.minBytes, cfg.maxBytes, cfg.stepFactor, cfg.warmup, cfg.iters, cfg.check ? 1 : 0);
  std::printf(
      "# chorus-bench op=%s ranks=%d dtype=%s redop=%s algo=%s iters=%d warmup=%d%s\n",
      cfg.op.c_str(), n, std::string(toString(cfg.dtype)).c_str(),
      reduces(cfg.op) ? std::string(toString(cfg.redop)).c_str() : "none", algo.c_str(), cfg.iters,
      cfg.warmup,
      cfg.wire == WireFormat::kNative ? "" : (" wire=" + std::string(toString(cfg.wire))).c_str());
  std::printf("#\n# Using devices\n");
  for (const std::string& line : ranks) std::printf("%s\n", line.c_str());
  std::printf("#\n");
  const bool b = bound.enabled;
  if (b) {
    std::printf(
        "# bound: cores=%d ranks_on_host=%d scale=%g; bound = 2 / ((1/R_reduce + "
        "1/R_copy) * scale), single-core rates measured by rank 0\n#\n",
        bound.cores, bound.ranksOnHost, bound.scale);
  }
  std::printf("# %10s  %12s  %8s  %6s  %6s  %36s  %36s\n", "", "", "", "", "",
              "out-of-place                        ", "in-place                            ");
  std::printf("# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
  for (int form = 0; form < 2; ++form) {
    std::printf("  %10s  %8s  %8s  %6s", "time", "algbw", "busbw", "#wrong");
  }
  if (b) std::printf("  %8s  %7s", "bound", "%bound");
  if (cfg.chorusColumns) std::printf("  %-16s  %9s", "algo", "cpu");
  std::printf("\n# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
  for (int form = 0; form < 2; ++form) {
    std::printf("  %10s  %8s  %8s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
  }
  if (b) std::printf("  %8s  %7s", "(GB/s)", "");
  if (cfg.chorusColumns) std::printf("  %-16s  %9s", "", "(ns/B)");
  std::printf("\n");
  std::fflush(stdout);
}

void printRow(const Config& cfg, const Row& r, const BoundInfo& bound) {
  std::printf("  %10zu  %12zu  %8s  %6s  %6d", r.bytes, r.count, ncclTypeName(cfg.dtype),
              reduces(cfg.op) ? std::string(toString(cfg.redop)).c_str() : "none", rootOf(cfg.op));
  printForm(cfg, r.outOfPlace);
  printForm(cfg, r.inPlace);
  const FormResult& p = r.primary();
  if (bound.enabled) {
    if (r.bound > 0) {
      std::printf("  %8.3f  %6.1f%%", r.bound, 100.0 * p.busbw / r.bound);
    } else {
      std::printf("  %8s  %7s", "N/A", "N/A");
    }
  }
  if (cfg.chorusColumns) std::printf("  %-16s  %9.3f", p.algo.c_str(), p.cpuNsPerByte);
  std::printf("\n");
  std::fflush(stdout);
}

void printFooter(const Config& cfg, const std::vector<Row>& rows) {
  long wrong = 0;
  double busbw = 0;
  int forms = 0;
  for (const Row& r : rows) {
    for (const FormResult* f : {&r.outOfPlace, &r.inPlace}) {
      if (!f->measured) continue;
      wrong += f->wrong;
      busbw += f->busbw;
      ++forms;
    }
  }
  std::printf("# Out of bounds values : %ld %s%s\n", wrong, wrong == 0 ? "OK" : "FAILED",
              cfg.check ? "" : " (not checked: -c 0)");
  std::printf("# Avg bus bandwidth    : %g \n#\n", forms ? busbw / forms : 0.0);
  std::fflush(stdout);
}

}  // namespace chorus::bench
