// chorus-train's command line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace chorus::train {

struct TrainOptions {
  std::string model = "mlp";  // mlp | cnn
  int epochs = 1;
  int batch = 64;  // per rank
  double lr = 1e-3;
  std::string optimizer = "adam";  // sgd (momentum) | adam
  double momentum = 0.9;
  int accumulation = 1;
  std::string mode = "sync";  // sync | delayed | local-sgd | diloco
  int localSgdPeriod = 8;
  std::string compress = "none";  // none | bf16 | fp16 | int8 | powersgd:R (sync, delayed)
  // diloco: inner steps between syncs (H), the outer SGD's learning rate and Nesterov momentum,
  // and the fragments synced at staggered steps (F).
  int syncEvery = 32;
  double outerLr = 0.7;
  double outerMomentum = 0.9;
  int fragments = 1;
  int evalEvery = 0;          // test accuracy every K optimizer steps (0: at epoch ends only)
  double targetAccuracy = 0;  // stop once the test accuracy reaches this (0: never)
  double bucketMb = 25;
  int minBuckets = 4;
  size_t limit = 0;  // first N training samples (0: all)
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string metrics;  // per-step CSV (rank 0)
  std::string plot;     // PNG (rank 0, needs /usr/bin/python3 with matplotlib)
  uint64_t seed = 1;
  int threads = 0;  // intra-op threads per rank (0: cores / local ranks)
  int checkEvery = 100;
  bool progress = true;
  int64_t maxSteps = 0;  // stop after this many optimizer steps in all (0: run every epoch)
  // Checkpoints (rank 0 writes; --resume reads the newest and rank 0 copies it to the others).
  std::string checkpointDir;
  int checkpointEvery = 100;
  bool resume = false;
  // Elastic training: a lost rank shrinks the job instead of ending it; replacements join.
  bool elastic = false;
  int minRanks = 1;
  int admitEvery = 10;  // elastic: admit waiting replacements every N steps (0: only at failures)
  // Fault injection for tests: on its first life (CHORUS_RESTART unset), the rank that started as
  // failRank stops in the middle of optimizer step failStep, after its forward pass, while the
  // others wait for its gradients: killed by SIGKILL (no goodbye to its peers), or, with
  // failSignal "stop", SIGSTOP (hung), or "exit": _exit(17).
  int failRank = -1;
  int failStep = 0;
  std::string failSignal = "kill";
};

// Parses argv; on --help or a usage error prints and returns the exit code to use (>= 0),
// otherwise returns -1.
int parseOptions(int argc, char** argv, TrainOptions& o);

}  // namespace chorus::train
