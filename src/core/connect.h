// Connecting the ranks of a communicator; shared by creation (create.cc) and split (split.cc).
#pragma once

#include "core/communicator_impl.h"

#include <memory>
#include <string>

namespace chorus {

// Connects the ranks of one communicator through a store already scoped to it (every key this
// communicator's rendezvous uses is its own). route: the store's host, which chooses the
// listening address (see transport::connect).
std::unique_ptr<Communicator::Impl> connectScoped(std::shared_ptr<Store> scoped,
                                                  const std::string& route, int rank, int size,
                                                  Options options);

}  // namespace chorus
