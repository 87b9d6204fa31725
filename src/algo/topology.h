// Which ranks share a host, from the host id of every rank: pure arithmetic for the hierarchical
// algorithms (unit-tested apart from any I/O).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

namespace chorus::algo {

struct Topology {
  // hosts[h] = ranks on host h in rank order; hosts numbered by their lowest rank.
  std::vector<std::vector<int>> hosts;
  std::vector<int> hostOf;     // rank -> host index
  std::vector<int> localRank;  // rank -> index within its host
  bool even = true;            // every host runs the same number of ranks

  int hostCount() const { return static_cast<int>(hosts.size()); }
  int maxLocal() const {
    size_t m = 0;
    for (const auto& h : hosts) m = h.size() > m ? h.size() : m;
    return static_cast<int>(m);
  }
  // Worth a hierarchical algorithm: several hosts, and some host with several ranks.
  bool layered() const { return hostCount() > 1 && maxLocal() > 1; }
};

inline Topology topologyOf(const std::vector<std::string>& hostIds) {
  Topology t;
  const int n = static_cast<int>(hostIds.size());
  t.hostOf.assign(static_cast<size_t>(n), -1);
  t.localRank.assign(static_cast<size_t>(n), -1);
  std::unordered_map<std::string, int> index;  // host id -> host index
  for (int r = 0; r < n; ++r) {
    auto [it, isNew] = index.try_emplace(hostIds[static_cast<size_t>(r)], t.hostCount());
    const int h = it->second;
    if (isNew) t.hosts.emplace_back();
    t.hostOf[static_cast<size_t>(r)] = h;
    t.localRank[static_cast<size_t>(r)] = static_cast<int>(t.hosts[static_cast<size_t>(h)].size());
    t.hosts[static_cast<size_t>(h)].push_back(r);
  }
  for (const auto& h : t.hosts) t.even = t.even && h.size() == t.hosts[0].size();
  return t;
}

}  // namespace chorus::algo
