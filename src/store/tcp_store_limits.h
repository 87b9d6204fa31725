// What the TCP store server accepts from its clients, so that no client can make it use
// unbounded memory or descriptors, or hold a connection without speaking.
#pragma once

#include <chorus/options.hpp>

#include <string>

namespace chorus::store {

// chorus::StoreLimits, given to the server's constructor (CHORUS_STORE_MAX_* through
// StoreLimits::fromEnv, or a tool's flags).
using ServerLimits = StoreLimits;

}  // namespace chorus::store
