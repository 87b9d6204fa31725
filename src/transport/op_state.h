// What the links of one transport share about the collective in progress.
#pragma once

#include "common/op_desc.h"

#include <chorus/error.hpp>

#include <array>
#include <memory>

namespace chorus::transport {

struct OpState {
  OpDesc current;
  bool inOp = false;
  bool broken = false;  // aborted or closed: control frames are no longer sent
  // An abort from a peer already past the current collective: that peer sent everything it owed
  // for this one, so the current collective may still finish; the next one fails with this.
  std::unique_ptr<Error> deferred;
  // Recent calls, to describe a late frame from a peer in mismatch messages.
  std::array<OpDesc, 16> history{};
  int abortFrom = -1;  // peer whose abort message was read last
};

}  // namespace chorus::transport
