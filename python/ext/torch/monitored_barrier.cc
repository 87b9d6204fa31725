// monitored_barrier: every rank reports to rank 0 through the store; rank 0 names the ranks that
// did not arrive in time and passes its verdict to the others. The texts carry the phrases
// torch's backends use ("Rank 1 failed to pass monitoredBarrier", "Rank 0 timed out in
// monitoredBarrier", "Rank 2 successfully reached monitoredBarrier, but received errors while
// waiting for send/recv from rank 0"), which scripts and torch's own tests match, after the
// backend, operation and rank, as every error of this backend.
#include "process_group_chorus.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace chorus::torch_backend {
namespace {

// "1" or "1, 2, 3".
std::string listOf(const std::vector<int>& ranks) {
  std::ostringstream s;
  for (size_t i = 0; i < ranks.size(); ++i) s << (i ? ", " : "") << ranks[i];
  return s.str();
}

}  // namespace

void ProcessGroupChorus::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  const auto timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;
  auto left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now());
  };
  const std::string base = "chorus/monitored_barrier/" + std::to_string(monitoredBarriers_++) + "/";
  const std::string verdictKey = base + "verdict";
  const int me = getRank();
  if (me != 0) {
    store_->set(base + "arrived/" + std::to_string(me), std::vector<uint8_t>{1});
    // Rank 0 gives its verdict on a missing rank only at its own deadline, which is later than
    // ours when it arrived later: wait a grace period past ours (the timeout, between 5 and 10 s)
    // to report that verdict, naming the missing rank, rather than a timeout of our own.
    const auto grace = std::clamp<std::chrono::milliseconds>(timeout, std::chrono::seconds(5),
                                                             std::chrono::seconds(10));
    const std::string reached = "chorus backend: monitored_barrier (rank " + std::to_string(me) +
                                "): Rank " + std::to_string(me) +
                                " successfully reached monitoredBarrier, but received errors "
                                "while waiting for send/recv from rank 0: ";
    try {
      store_->wait({verdictKey}, std::max(left(), std::chrono::milliseconds(1)) + grace);
    } catch (const std::exception&) {
      TORCH_CHECK(false, reached, "rank 0 gave no verdict within ", (timeout + grace).count(),
                  " ms");
    }
    const auto verdict = store_->get(verdictKey, timeout_);
    const std::string text(verdict.begin(), verdict.end());
    TORCH_CHECK(text == "ok", reached, "rank 0 reports: ", text);
    return;
  }
  std::vector<int> missing;
  bool ranOut = false;  // the deadline passed before rank 0 could wait for a missing rank
  for (int r = 1; r < getSize(); ++r) {
    const auto wait = missing.empty() ? left() : std::chrono::milliseconds(0);
    try {
      store_->wait({base + "arrived/" + std::to_string(r)},
                   std::max(wait, std::chrono::milliseconds(1)));
    } catch (const std::exception&) {
      if (missing.empty()) ranOut = wait.count() <= 0;
      missing.push_back(r);
      if (!waitAllRanks) break;
    }
  }
  if (missing.empty()) {
    const std::string ok = "ok";
    store_->set(verdictKey, std::vector<uint8_t>(ok.begin(), ok.end()));
    return;
  }
  std::ostringstream why;
  if (ranOut) {
    why << "Rank 0 timed out in monitoredBarrier after "
        << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start)
               .count()
        << " ms (timeout " << timeout.count() << " ms) while waiting for "
        << (missing.size() == 1 ? "rank " : "ranks ") << listOf(missing);
  } else {
    why << (missing.size() == 1 ? "Rank " : "Ranks ") << listOf(missing)
        << " failed to pass monitoredBarrier in " << timeout.count() << " ms ("
        << (missing.size() == 1 ? "it" : "they") << " did not reach monitored_barrier in time)";
  }
  const std::string text = why.str();
  store_->set(verdictKey, std::vector<uint8_t>(text.begin(), text.end()));
  TORCH_CHECK(false, "chorus backend: monitored_barrier (rank 0): ", text);
}

}  // namespace chorus::torch_backend
