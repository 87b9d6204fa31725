// Which ranks share this rank's cores, and whether they outnumber them. Sharing cores is a
// property of the machine, not of the host name or the network namespace: containers and the
// emulated hosts of one machine run on the same cores. A rank that polls while the ranks on its
// cores outnumber them takes the core the awaited peer (or the kernel's network work) needs, so
// such ranks give the core away between polls.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::transport {

// Where a process may run, as published in its record in the store (docs/wire.md).
struct CorePlacement {
  std::string machine;    // the kernel's boot id: equal ids = the same machine
  std::vector<int> cpus;  // the CPUs it may run on (sched_getaffinity), ascending; empty: all
  uint64_t cgroup = 0;    // the cgroup whose CPU quota limits it (inode); 0: no quota
  double quotaCores = 0;  // that quota in cores (cpu.max or cfs_quota / period); 0: none
};

// This process's placement, read from /proc and the cgroup filesystem.
CorePlacement thisPlacement();

// One word without spaces: "<boot id>/cpus=0-3,6/cg=<inode>/quota=<cores>". Decoding never
// throws: a word it does not understand is taken as a machine id with nothing else known.
std::string encodePlacement(const CorePlacement& p);
CorePlacement decodePlacement(std::string_view word);

// "0-3,6" <-> {0, 1, 2, 3, 6}. parseCpuList returns empty for malformed text.
std::string formatCpuList(const std::vector<int>& cpus);
std::vector<int> parseCpuList(std::string_view text);

// The policy. The ranks that compete with `self` are those on its machine whose CPU sets overlap
// its own (an empty set stands for all `machineCpus` CPUs). They share the union of their CPU
// sets, less where quotas cap it: each distinct quota cgroup among them contributes at most its
// quota. True when those ranks (self included) outnumber the cores they share.
bool ranksOutnumberCores(const CorePlacement& self, const std::vector<CorePlacement>& peers,
                         int machineCpus);

}  // namespace chorus::transport
