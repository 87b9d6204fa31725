// chorus-bench: nccl-tests style measurement of one collective over a range of sizes.
#pragma once

#include <chorus/chorus.h>
#include <chorus/chorus.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace chorus::bench {

struct Config {
  std::string op = "allreduce";  // allreduce | reduce_scatter | all_gather | broadcast
  DataType dtype = DataType::kF32;
  ReduceOp redop = ReduceOp::kSum;
  size_t minBytes = 8;
  size_t maxBytes = 64u << 20;
  double stepFactor = 2;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  std::string jsonPath;
  bool nonBlocking = false;  // time issue + wait of the C++ API instead of the blocking C call
};

struct Row {
  size_t bytes = 0;
  size_t count = 0;   // elements per rank's contribution, as nccl-tests prints it
  double timeUs = 0;  // median over iterations of the slowest rank's time
  double algbw = 0;   // GB/s
  double busbw = 0;   // GB/s
  long wrong = 0;     // elements that differed from the expected result, over all ranks
  std::string algo;   // algorithm the library chose for this size
};

// Runs the sweep collectively; every rank gets the same rows. Timed calls go through the C API
// (what MPI-style callers use) unless cfg.nonBlocking.
std::vector<Row> runSweep(chorus_comm* c, Communicator& comm, const Config& cfg);

// nccl-tests bus bandwidth factor.
double busFactor(const std::string& op, int worldSize);

void printTable(const Config& cfg, int worldSize, const std::string& algo,
                const std::vector<Row>& rows);
void writeJson(const Config& cfg, int worldSize, const std::string& algo,
               const std::vector<Row>& rows);

}  // namespace chorus::bench
