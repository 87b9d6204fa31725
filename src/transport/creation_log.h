// The phases of a communicator's creation, one line each on stderr under CHORUS_DEBUG (for this
// rank): "chorus[3]: creation: records +412.0 ms (step 380.5 ms, cpu 2.1 ms) at
// 1733120000123.4" (cpu: this thread's). The wall
// clock at the end lines up the ranks of one host: where the time goes with many ranks.
#pragma once

#include <chorus/options.hpp>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>

namespace chorus::transport {

class CreationLog {
 public:
  CreationLog(const Options& options, int rank)
      : on_(options.debug == DebugLevel::kAll ||
            (options.debug == DebugLevel::kRank0 && rank == 0)),
        rank_(rank) {}

  bool on() const { return on_; }

  // Logs that `phase` ended now.
  void mark(const char* phase) {
    if (!on_) return;
    using Ms = std::chrono::duration<double, std::milli>;
    const auto now = std::chrono::steady_clock::now();
    const double wall = Ms(std::chrono::system_clock::now().time_since_epoch()).count();
    const double cpu = cpuMs();
    std::fprintf(stderr, "chorus[%d]: creation: %s +%.1f ms (step %.1f ms, cpu %.1f ms) at %.1f\n",
                 rank_, phase, Ms(now - start_).count(), Ms(now - last_).count(), cpu - lastCpu_,
                 wall);
    last_ = now;
    lastCpu_ = cpu;
  }

 private:
  // This thread's user and system time.
  static double cpuMs() {
    rusage u{};
    ::getrusage(RUSAGE_THREAD, &u);
    auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
    return ms(u.ru_utime) + ms(u.ru_stime);
  }

  bool on_;
  int rank_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_ = start_;
  double lastCpu_ = on_ ? cpuMs() : 0;
};

}  // namespace chorus::transport
