// Bootstrap of the TCP transport: publish this rank's address, connect to every peer.
#pragma once

#include "transport/tcp/tcp_transport.h"

#include <chorus/options.hpp>
#include <chorus/store.hpp>

#include <memory>

namespace chorus::transport::tcp {

// Every rank listens, publishes "addr/<rank>" in the store and connects to the lower ranks; the
// higher ranks connect to it. Each connection starts with a hello carrying the job id (agreed
// through the store, key "job") and both ranks; anything else on the port is dropped.
// routeHost: the store's host, used to choose the listening address (see chooseListenAddress).
std::unique_ptr<TcpTransport> connectMesh(Store& store, int rank, int size, const Options& options,
                                          const std::string& routeHost);

}  // namespace chorus::transport::tcp
