// The parts of Slurm's job description a rank needs without asking Slurm: the first host of a
// compressed host list, how many tasks one node runs, and the store port a job step derives.
#pragma once

#include <cstdint>
#include <string>

namespace chorus::slurm {

// The first host of a Slurm host list: "vm" -> "vm", "node[07-12,20],gpu1" -> "node07",
// "rack[2-3]-n[01-04]" -> "rack2-n01". Throws Error(kInvalidArgument) on an unbalanced bracket or
// an empty list.
std::string firstHost(const std::string& hostList);

// Tasks on node `nodeIndex` from a tasks-per-node list: "4" (one node), "2(x3),1" -> 2, 2, 2, 1.
// Returns -1 when the list is malformed or shorter than nodeIndex + 1.
int tasksOnNode(const std::string& tasksPerNode, int nodeIndex);

// The store port of job step (jobId, stepId): 20000 + (jobId * 16 + stepId) mod 12000. Below
// Linux's ephemeral range (32768 up), so an outgoing connection never holds it; steps of one job
// and neighbouring jobs get different ports.
int storePort(uint64_t jobId, uint64_t stepId);

}  // namespace chorus::slurm
