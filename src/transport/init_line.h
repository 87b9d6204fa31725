// The first line of a communicator's creation under CHORUS_DEBUG (1 or all), on every rank: the
// library's version and whether this rank's connections authenticate and encrypt, so that a
// job's security can be read from its logs. Each rank reads its own settings, so each prints.
#pragma once

#include "auth/settings.h"

#include <chorus/options.hpp>

#include <string>

namespace chorus::transport {

// "chorus[3]: init: chorus 0.1.0, rank 3 of 8; authentication on (...); encryption off (...)".
// rank < 0: a newcomer joining a running job, whose rank is not known yet.
std::string initLine(int rank, int size, const auth::AuthSettings& auth);

// Prints initLine on stderr when options.debug is not off.
void printInitLine(const Options& options, int rank, int size);

}  // namespace chorus::transport
