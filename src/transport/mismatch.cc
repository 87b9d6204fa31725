#include "transport/mismatch.h"

#include <string>

namespace chorus::transport {

std::optional<Error> findMismatch(int peer, const FrameHeader& theirs, const OpDesc& mine,
                                  const Request* awaited) {
  const std::string rank = "rank " + std::to_string(peer);
  if (theirs.op.seq == mine.seq && !theirs.op.sameCall(mine)) {
    return Error(ErrorCode::kMismatch, "mismatched collectives: this rank called " + mine.name() +
                                           " " + mine.describe() + " but " + rank + " called " +
                                           theirs.op.name() + " " + theirs.op.describe());
  }
  if (theirs.op.seq != mine.seq) {
    return Error(ErrorCode::kMismatch,
                 rank + " is at " + theirs.op.name() + " while this rank waits in " + mine.name());
  }
  if (awaited && (theirs.step != awaited->step || theirs.bytes != awaited->bytes)) {
    return Error(ErrorCode::kMismatch,
                 rank + " sent message " + std::to_string(theirs.step) + " of " +
                     std::to_string(theirs.bytes) + " bytes where this rank expects message " +
                     std::to_string(awaited->step) + " of " + std::to_string(awaited->bytes) +
                     " bytes (do all ranks use the same CHORUS_* settings?)");
  }
  return std::nullopt;
}

}  // namespace chorus::transport
