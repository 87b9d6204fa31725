// The process's trace service: one small thread that publishes the progress record of every
// communicator to its store (CHORUS_PROGRESS_SECONDS) and writes their dumps when the signal of
// CHORUS_TRACE_SIGNAL arrives. It only reads the recorders, without locks, so it never waits on a
// communicator's worker, and a collective never waits on it.
#pragma once

#include "trace/subject.h"

#include <memory>

namespace chorus::trace {

// Registers a communicator: its progress records start (when it has a root store, two or more
// ranks and a period), and the signal of its settings, if any, is installed (once per process:
// the handler only writes a byte to a pipe).
void watch(const std::shared_ptr<Subject>& subject);
// Stops both for this communicator. Never waits for the service thread.
void unwatch(const Subject* subject);

}  // namespace chorus::trace
