// What chorus-train writes as it trains: the per-step metrics file and the progress line.
#pragma once

#include <chorus/dp.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::train {

struct Row {
  int64_t step;
  int epoch;
  double loss;
  chorus::dp::StepMetrics m;
  double wallSeconds = 0;   // since training started, at the end of this step
  double trainSeconds = 0;  // the same without the time spent evaluating
  double accuracy = -1;     // set on the steps after which the test set was evaluated
};

// One line per optimizer step (docs/dp.md, the trainer's metrics file). Throws when the file
// cannot be written.
void writeCsv(const std::string& path, const std::vector<Row>& rows);

class Progress {
 public:
  Progress(bool enabled, int epoch, int epochs, size_t total);

  // Prints the epoch's progress bar (a line per 10% without a terminal).
  void update(size_t done, double loss, double samplesPerSecond);

 private:
  bool enabled_, tty_;
  int epoch_, epochs_;
  size_t total_;
  int lastTenth_ = -1;
};

}  // namespace chorus::train
