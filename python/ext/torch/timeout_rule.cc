#include "timeout_rule.h"

#include <chorus/options.hpp>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>

namespace chorus::torch_backend {
namespace {

std::string secondsText(std::chrono::milliseconds ms) {
  std::ostringstream s;
  s << static_cast<double>(ms.count()) / 1000.0 << " s";
  return s.str();
}

// True the first time this process sees the pair.
bool firstTime(std::chrono::milliseconds group, std::chrono::milliseconds chorus) {
  static std::mutex mu;
  static std::set<std::pair<int64_t, int64_t>> said;
  std::lock_guard<std::mutex> lock(mu);
  return said.emplace(group.count(), chorus.count()).second;
}

}  // namespace

std::chrono::milliseconds chooseTimeout(std::chrono::milliseconds groupTimeout,
                                        const std::string& group, int rank) {
  const char* set = std::getenv("CHORUS_TIMEOUT");
  if (!set || !*set) return groupTimeout;
  const std::chrono::milliseconds chorus = Options::fromEnv().timeout;
  if (chorus == groupTimeout) return groupTimeout;
  const bool chorusWins = chorus < groupTimeout;
  if (rank == 0 && firstTime(groupTimeout, chorus)) {
    std::ostringstream s;
    s << "chorus backend: collectives of " << group << " time out after "
      << secondsText(chorusWins ? chorus : groupTimeout) << ": the shorter of CHORUS_TIMEOUT ("
      << secondsText(chorus) << ") and the group's timeout (" << secondsText(groupTimeout)
      << ", init_process_group/new_group timeout=)\n";
    std::fputs(s.str().c_str(), stderr);
  }
  return chorusWins ? chorus : groupTimeout;
}

}  // namespace chorus::torch_backend
