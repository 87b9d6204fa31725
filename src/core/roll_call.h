// Before the ranks of a new communicator connect, each announces itself in the store: which
// process it is and the world size it expects. A misconfigured launch then fails at once, on
// every rank involved, with the conflict named, instead of at the timeout:
//   - two processes claim one rank (or a store that held another job is reused);
//   - ranks disagree on the world size.
#pragma once

#include "common/deadline.h"

#include <chorus/store.hpp>

#include <cstdint>

namespace chorus {

// root: the store the ranks share; generation: this creation's number for `rank` (root's
// "chorus/created/<rank>" counter), whose keys live under "chorus/<generation>/". Returns when
// every rank of the world has announced itself; throws Error on a conflict (kInvalidArgument) or
// at the deadline (kTimeout, naming the ranks that never came).
void rollCall(Store& root, int64_t generation, int rank, int size, const Deadline& deadline);

// After connecting: a conflict posted meanwhile by a late claimant of a rank (throws as above).
void checkNoConflict(Store& root, int64_t generation);

}  // namespace chorus
