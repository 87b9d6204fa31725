// One communicator as the dump writer and the progress publisher see it: its recorder and what
// names it. Shared between the communicator and the process's trace service (service.h), so
// that either may outlive the other.
#pragma once

#include "trace/recorder.h"
#include "trace/settings.h"

#include <chorus/store.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace chorus::trace {

struct Subject {
  Subject(Settings s, uint64_t communicatorId, int rank, int size)
      : settings(std::move(s)), id(hexId(communicatorId)), recorder(settings.entries, rank, size) {}

  static std::string hexId(uint64_t v);

  const Settings settings;
  const std::string id;  // 16 hex digits
  Recorder recorder;
  // The store the ranks met at (not the communicator's scoped one); null: no progress records.
  std::shared_ptr<Store> rootStore;
  uint64_t nextPublishUs = 0;  // service thread only
};

}  // namespace chorus::trace
