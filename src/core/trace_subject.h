// A communicator's flight recorder, for the library's layers above core (dp's step timing). It
// lives here, not in trace/, because only core sees inside a Communicator (tracing.cc).
#pragma once

#include "trace/subject.h"

#include <chorus/communicator.hpp>

#include <memory>

namespace chorus {

// The recorder of `comm` and what names it; null when the recorder is off.
std::shared_ptr<trace::Subject> traceSubjectOf(const Communicator& comm);

}  // namespace chorus
