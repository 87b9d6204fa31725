// A point in time that a wait must not pass.
#pragma once

#include <algorithm>
#include <chrono>

namespace chorus {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  // Saturates: a timeout of ten years or more never expires (and now() + d cannot overflow), a
  // negative one has already expired.
  static Deadline after(std::chrono::milliseconds d) {
    if (d >= kForever) return never();
    return Deadline(Clock::now() + std::max(d, std::chrono::milliseconds(0)));
  }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  explicit Deadline(Clock::time_point at) : at_(at) {}

  Clock::time_point at() const { return at_; }
  bool expired() const { return Clock::now() >= at_; }
  // Milliseconds left, clamped to [0, cap]; rounds up so that a poll does not spin.
  int remainingMs(int cap = 1 << 30) const {
    if (at_ == Clock::time_point::max()) return cap;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(at_ - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, cap));
  }

 private:
  static constexpr std::chrono::milliseconds kForever = std::chrono::hours(24 * 365 * 10);

  Clock::time_point at_;
};

}  // namespace chorus
