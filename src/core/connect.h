// Connecting the ranks of a communicator; shared by creation (create.cc) and split (split.cc).
#pragma once

#include "common/deadline.h"
#include "core/communicator_impl.h"

#include <memory>
#include <string>

namespace chorus {

// Connects the ranks of one communicator through a store already scoped to it (every key this
// communicator's rendezvous uses is its own). route: the store's host, which chooses the
// listening address (see transport::connect).
std::unique_ptr<CommunicatorImpl> connectScoped(std::shared_ptr<Store> scoped,
                                                const std::string& route, int rank, int size,
                                                Options options);
// The same, connected by `by` instead of within options.timeout (which the communicator keeps).
std::unique_ptr<CommunicatorImpl> connectScopedBy(std::shared_ptr<Store> scoped,
                                                  const std::string& route, int rank, int size,
                                                  Options options, const Deadline& by);

// The host of a "tcp://host:port" store URL ("" for other stores): it chooses the listening
// address (see transport::connect).
std::string routeOf(const std::string& storeUrl);

}  // namespace chorus
