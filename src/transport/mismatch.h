// The one description of a mismatch, for every link kind: a data frame that this rank cannot
// take because the peer runs another call, is at another collective, or sends another message.
#pragma once

#include "common/op_desc.h"
#include "transport/frame.h"
#include "transport/transport.h"

#include <chorus/error.hpp>

#include <optional>

namespace chorus::transport {

// Nothing when the data frame `theirs` from `peer` fits this rank, which runs `mine` and awaits
// `awaited` (null: only the call is compared); otherwise Error(kMismatch) naming both sides.
std::optional<Error> findMismatch(int peer, const FrameHeader& theirs, const OpDesc& mine,
                                  const Request* awaited);

}  // namespace chorus::transport
