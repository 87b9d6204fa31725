// The first line of a communicator's creation under CHORUS_DEBUG (1 or all), on every rank: the
// library's version and whether this rank's connections authenticate and encrypt, so that a
// job's security can be read from its logs. Each rank reads its own settings, so each prints:
//   chorus[3]: init: chorus 0.2.0, rank 3 of 8; authentication on (...); encryption off (...)
// Defined beside the links' owners (peer_transport_init_line.cc), which read the same
// authentication settings; the version comes from core, which implements the API that defines it.
#pragma once

#include <chorus/options.hpp>

#include <string>

namespace chorus::transport {

// Prints the line on stderr when options.debug is not off. rank < 0: a newcomer joining a running
// job, whose rank is not known yet.
void printInitLine(const Options& options, int rank, int size, const std::string& version);

}  // namespace chorus::transport
