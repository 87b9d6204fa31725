#include "trace/clock.h"

#include <chrono>
#include <mutex>
#include <thread>

namespace chorus::trace {
namespace {

struct Reference {
  uint64_t ticks;
  uint64_t ns;  // CLOCK_REALTIME
};

uint64_t realNanos() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// A tick count and the wall-clock time read as close together as this thread manages.
Reference readPair() {
  Reference best{0, 0};
  uint64_t narrowest = ~uint64_t{0};
  for (int i = 0; i < 5; ++i) {
    const uint64_t a = ticks();
    const uint64_t ns = realNanos();
    const uint64_t b = ticks();
    if (b - a < narrowest) {
      narrowest = b - a;
      best = {a + (b - a) / 2, ns};
    }
  }
  return best;
}

const Reference& reference() {
  static const Reference r = readPair();
  return r;
}

constexpr uint64_t kMinSpanNs = 50'000'000;

double nanosPerTick() {
  const Reference& r = reference();
  Reference now = readPair();
  if (now.ns < r.ns + kMinSpanNs) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(r.ns + kMinSpanNs - now.ns));
    now = readPair();
  }
  if (now.ticks <= r.ticks) return 1.0;
  return static_cast<double>(now.ns - r.ns) / static_cast<double>(now.ticks - r.ticks);
}

double roughTicksPerMicro() {
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t a = ticks();
  auto t1 = t0;
  while (t1 - t0 < std::chrono::microseconds(200)) t1 = std::chrono::steady_clock::now();
  const uint64_t b = ticks();
  const double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
  return b > a ? static_cast<double>(b - a) / us : 1000.0;
}

}  // namespace

void startTickClock() { (void)reference(); }

uint64_t roughTicksOf(double micros) {
  static const double perMicro = roughTicksPerMicro();
  return static_cast<uint64_t>(micros * perMicro);
}

WallClock WallClock::now() {
  const Reference& r = reference();
  WallClock c;
  c.refTicks = r.ticks;
  c.refNs = static_cast<double>(r.ns);
  c.nsPerTick = nanosPerTick();
  return c;
}

}  // namespace chorus::trace
