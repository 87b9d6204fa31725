// The transport of one communicator, from its rendezvous: every rank listens, publishes
// "addr/<rank>" in the store, reads every peer's (and rank 0's "job") in one request where the
// store can, and connects to every peer; peers on this host then agree on shared memory, the
// others stay on TCP. Each TCP connection starts with a hello carrying the job id (agreed through
// the store, key "job") and both ranks; anything else on the port is dropped.
#pragma once

#include "transport/transport.h"

#include <chorus/options.hpp>
#include <chorus/store.hpp>

#include <memory>
#include <string>

namespace chorus::transport {

// routeHost: the store's host, used to choose the listening address (the local address that
// routes to it, unless Options::ifname names an interface).
std::unique_ptr<Transport> connect(Store& store, int rank, int size, const Options& options,
                                   const std::string& routeHost);

}  // namespace chorus::transport
