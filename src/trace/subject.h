// One communicator as the dump writer and the progress publisher see it: its recorder and what
// names it. Shared between the communicator and the process's trace service (service.h), so
// that either may outlive the other.
#pragma once

#include "trace/recorder.h"
#include "trace/settings.h"
#include "trace/span_log.h"

#include <chorus/store.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus::trace {

// Spans a communicator keeps for the layers above it (span_log.h).
inline constexpr size_t kSpanCapacity = 1024;

struct Subject {
  Subject(Settings s, uint64_t communicatorId, int rank, int size)
      : settings(std::move(s)),
        id(hexId(communicatorId)),
        recorder(settings.entries, rank, size, settings.detailMicros) {}

  static std::string hexId(uint64_t v);

  const Settings settings;
  const std::string id;  // 16 hex digits
  Recorder recorder;
  SpanLog spans{settings.entries > 0 ? kSpanCapacity : 0};
  // The store the ranks met at (not the communicator's scoped one); null: no progress records.
  std::shared_ptr<Store> rootStore;
  uint64_t nextPublishUs = 0;  // service thread only
  // Heartbeat (settings.heartbeatSeconds, heartbeat.h): what the communicator does with a peer
  // whose record went stale while this rank waited in a call (set before watch(); run on the
  // service thread, so it must not block), and the peers already reported (service thread only).
  std::function<void(int rank, double silentSeconds)> onSilentPeer;
  std::vector<bool> reportedSilent;
  // When the records started (wall clock, set before watch()): a peer that has published none a
  // heartbeat timeout after that is judged as if its last record were that old.
  uint64_t recordsSinceUs = 0;
  // Stall check (heartbeat.h), set at run time (Communicator::setStallTimeout): while this rank
  // has waited in a call for this many seconds, a live peer that has been in no call for as long
  // is declared stalled through onStalledPeer (run like onSilentPeer). 0: off. Needs the heartbeat.
  std::atomic<double> stallSeconds{0};
  std::function<void(int rank, double idleSeconds)> onStalledPeer;
  // This rank is away from collectives on purpose (Communicator::setPaused): its record says so,
  // and its peers' stall checks pass it over.
  std::atomic<bool> paused{false};
};

}  // namespace chorus::trace
