// The per-step metrics file and the progress line.
#include "metrics_file.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace chorus::train {

void writeCsv(const std::string& path, const std::vector<Row>& rows) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  f << "step,epoch,loss,compute_s,comm_s,exposed_comm_s,bytes,buckets,buckets_early,divergence,"
       "test_accuracy,bytes_sent,wall_s,train_s\n";
  for (const auto& r : rows) {
    f << r.step << ',' << r.epoch << ',' << r.loss << ',' << r.m.computeSeconds << ','
      << r.m.commSeconds << ',' << r.m.exposedCommSeconds << ',' << r.m.bytesReduced << ','
      << r.m.buckets << ',' << r.m.bucketsLaunchedEarly << ',';
    if (r.m.divergence) f << *r.m.divergence;
    f << ',';
    if (r.accuracy >= 0) f << r.accuracy;
    f << ',' << r.m.bytesSent << ',' << r.wallSeconds << ',' << r.trainSeconds << '\n';
  }
}

Progress::Progress(bool enabled, int epoch, int epochs, size_t total)
    : enabled_(enabled),
      tty_(isatty(STDERR_FILENO) != 0),
      epoch_(epoch),
      epochs_(epochs),
      total_(total) {}

void Progress::update(size_t done, double loss, double samplesPerSecond) {
  if (!enabled_ || total_ == 0) return;
  // Without a terminal (chorus-run pipes the ranks' output), one line per 10%.
  int tenth = static_cast<int>(done * 10 / total_);
  if (!tty_ && tenth == lastTenth_ && done != total_) return;
  lastTenth_ = tenth;
  constexpr int kWidth = 30;
  int filled = static_cast<int>(done * kWidth / total_);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "%sepoch %d/%d [%s] %zu/%zu  loss %.4f  %.0f samples/s%s", tty_ ? "\r" : "",
               epoch_, epochs_, bar.c_str(), done, total_, loss, samplesPerSecond,
               tty_ ? "" : "\n");
  if (tty_ && done == total_) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace chorus::train
