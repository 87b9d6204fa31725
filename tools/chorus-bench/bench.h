// chorus-bench: nccl-tests style measurement of one collective over a range of sizes.
#pragma once

#include <chorus/chorus.h>
#include <chorus/chorus.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace chorus::bench {

struct Config {
  // allreduce | reduce_scatter | all_gather | broadcast | reduce | gather | scatter | all_to_all
  // | all_gather_v | reduce_scatter_v | all_to_all_v | send_recv
  std::string op = "allreduce";
  DataType dtype = DataType::kF32;
  ReduceOp redop = ReduceOp::kSum;
  size_t minBytes = 8;
  size_t maxBytes = 64u << 20;
  double stepFactor = 2;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  bool inPlace = true;  // also time the in-place form (where the collective has one)
  // --chorus-columns: chorus's own columns after nccl-tests' thirteen (algo, cpu; --bound's)
  bool chorusColumns = false;
  std::string jsonPath;
  std::string api = "c";  // "c": the blocking C call; "cpp": the C++ API's issue + wait
  bool bound = false;     // --bound: measure memory rates, print bound and %bound per row
  int boundReps = 5;      // samples per size and kernel (median)
  WireFormat wire = WireFormat::kNative;  // --wire: all-reduce wire format (f32 sum/avg)
  // --registered: the buffers come from Communicator::allocate (read in place on one host)
  bool registered = false;
};

// nccl-tests times each size twice: out of place (separate send and receive buffers) and in place
// (the send data inside the receive buffer, or the other way round, where the library's in-place
// rule puts it). broadcast has one buffer, so only the in-place form; send_recv and all_to_all_v
// have no in-place form.
enum class Form { kOutOfPlace, kInPlace };
bool hasForm(const std::string& op, Form form);

struct FormResult {
  bool measured = false;
  double timeUs = 0;  // median over iterations of the slowest rank's time
  // Mean of the same iterations between the 10th and the 90th percentile: not rounded to the
  // clock's steps as one iteration is, for comparing two runs finely (JSON only).
  double trimmedMeanUs = 0;
  double algbw = 0;  // GB/s
  double busbw = 0;  // GB/s
  long wrong = 0;    // elements that differed from the expected result, over all ranks
  std::string algo;  // algorithm the library chose for this size
  // CPU time (user + system, all threads, getrusage around the timed calls) summed over the
  // ranks, per byte all-reduced (iterations x bytes).
  double cpuNsPerByte = 0;
};

struct Row {
  size_t bytes = 0;
  size_t count = 0;  // elements per rank's contribution, as nccl-tests prints it
  FormResult outOfPlace;
  FormResult inPlace;
  double bound = 0;  // --bound: busbw upper bound on one host at this size (GB/s); 0: none
  // The form the JSON's row fields describe: out of place, or broadcast's only form.
  const FormResult& primary() const { return outOfPlace.measured ? outOfPlace : inPlace; }
};

// --bound. Single-core rates measured on rank 0 before the sweep, per size of the sweep:
//   copy   = S / time of memcpy(dst, src, S)                           (GB/s)
//   reduce = S / time of a[i] += b[i] over S/4 floats (f32)            (GB/s)
// Each rank of an all-reduce reduces (N-1)/N of the buffer and copies (N-1)/N of it, so
//   time >= (N-1)/N * S * (1/reduce + 1/copy) * scale,  scale = max(1, ranks on host / cores)
//   bound = busbw at that time = 2 / ((1/reduce + 1/copy) * scale)     (GB/s; N cancels)
struct BoundRates {
  size_t bytes = 0;
  double copy = 0;    // GB/s
  double reduce = 0;  // GB/s
};
struct BoundInfo {
  bool enabled = false;
  int cores = 0;        // CPUs this process may run on (sched_getaffinity)
  int ranksOnHost = 0;  // CHORUS_LOCAL_SIZE (or mpirun's), else the world size
  double scale = 1;     // max(1, ranksOnHost / cores)
  std::vector<BoundRates> rates;
};

int coresAvailable();
int ranksOnThisHost(int worldSize);
BoundInfo measureBound(const std::vector<size_t>& sizes, int worldSize, int reps);
double boundBusbw(const BoundInfo& info, size_t bytes);  // 0 when the size was not measured

// The message sizes (bytes) of the sweep, as runSweep uses them.
std::vector<size_t> sweepBytes(const Config& cfg, int worldSize);

// Runs the sweep collectively; every rank gets the same rows, and onRow sees each as soon as it
// is measured. Timed calls go through the C API (what MPI-style callers use) unless cfg.api is
// "cpp".
std::vector<Row> runSweep(chorus_comm* c, Communicator& comm, const Config& cfg,
                          const std::function<void(const Row&)>& onRow = {});

// nccl-tests bus bandwidth factor.
double busFactor(const std::string& op, int worldSize);

// What nccl-tests prints in the type, redop and root columns: "float", "bfloat16", ...; the op's
// name, or "none" for a collective that does not reduce; 0 for a collective with a root, else -1.
const char* ncclTypeName(DataType t);
bool reduces(const std::string& op);
int rootOf(const std::string& op);

// "# launch: launcher=... rank=... size=... local_rank=... local_size=... store=... store_from=..."
void printLaunch(const LaunchInfo& launch);

// Collective: "#  Rank  0 Group  0 Pid   1234 on host device cpu" for every rank, as nccl-tests
// lists its devices (a rank here is a process on CPUs).
std::vector<std::string> describeRanks(chorus_comm* c);

// The table in nccl-tests' format (table.cc): header lines starting with '#'; per size: size,
// count, type, redop, root, then time, algbw, busbw and #wrong out of place and in place (N/A
// for a form the collective lacks), and with cfg.chorusColumns chorus's own (bound, %bound, algo,
// cpu); the "# Out of bounds values" and "# Avg bus bandwidth" lines at the end.
void printHeader(const Config& cfg, int worldSize, const std::string& algo,
                 const std::vector<std::string>& ranks, const BoundInfo& bound);
void printRow(const Config& cfg, const Row& row, const BoundInfo& bound);
void printFooter(const Config& cfg, const std::vector<Row>& rows);

void writeJson(const Config& cfg, int worldSize, const std::string& algo,
               const std::vector<Row>& rows, const BoundInfo& bound = {});

// --calibrate: every rank calls it; rank 0 writes the tuning file.
void calibrate(chorus_comm* c, const std::string& path);

}  // namespace chorus::bench
