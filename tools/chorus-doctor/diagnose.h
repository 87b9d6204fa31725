// Diagnoses a job from the dumps of its ranks (chorus-doctor DIR) or from the progress records
// its ranks publish (chorus-doctor --live).
#pragma once

#include <chorus/store.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "finding.h"
#include "trace.h"

namespace chorus::doctor {

// One finding per communicator, in the order of the dumps (sorted by communicator id).
std::vector<Finding> diagnoseDumps(const std::vector<Dump>& dumps);

struct LiveOptions {
  // A record published longer ago than this is stale: its rank stopped publishing.
  double staleSeconds = 5.0;
  // A pending call with progress more recent than this is not reported as a hang.
  double quietSeconds = 2.0;
};

// The progress records of every registered communicator in the store, grouped by
// communicator. Unreadable records go to problems.
struct LiveRecords {
  struct Communicator {
    std::string id;
    int size = 0;
    std::vector<Progress> records;  // by rank; ranks without a record are absent
  };
  std::vector<Communicator> communicators;
  std::vector<std::string> problems;
};
LiveRecords readProgress(Store& store, std::chrono::milliseconds timeout);

std::vector<Finding> diagnoseLive(const LiveRecords& records, int64_t nowUs,
                                  const LiveOptions& options);

}  // namespace chorus::doctor
