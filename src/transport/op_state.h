// What the links of one transport share about the collective in progress.
#pragma once

#include "common/op_desc.h"
#include "trace/recorder.h"

#include <chorus/error.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

namespace chorus::transport {

struct OpState {
  OpDesc current;
  bool inOp = false;
  bool broken = false;  // aborted or closed: control frames are no longer sent
  // An abort from a peer already past the current collective: that peer sent everything it owed
  // for this one, so the current collective may still finish; the next one fails with this.
  std::unique_ptr<Error> deferred;
  uint64_t deferredSeq = 0;  // the call that peer failed in: deferred fails this rank's call there
  int abortFrom = -1;        // peer whose abort message was read last
  // The flight recorder (null: off), told about the current call's traffic by the links.
  trace::Recorder* recorder = nullptr;
  // A progress pass of the current call found nothing to do: messages that arrive from now on
  // were not already waiting when this rank started the call.
  bool dry = false;
  // While a wait of the current call is in progress: the latest clock reading (trace::ticks())
  // of the waiting thread, which the recorder uses as the arrival time of what the next polls
  // find; 0 outside a wait, with the recorder off, or in a call it does not follow in detail.
  uint64_t polledAt = 0;
  // A new reading for polledAt, within such a wait only.
  void refreshPolledAt() {
    if (polledAt != 0) polledAt = trace::ticks();
  }

  // The current call's traffic, for a call the recorder follows in detail (trace/recorder.h).
  bool detailed() const { return recorder && recorder->detailed(); }
  void sent(int peer, uint64_t bytes) {
    if (detailed()) recorder->sent(peer, bytes);
  }
  void received(int peer, uint64_t bytes) {
    if (detailed()) recorder->received(peer, bytes);
  }
  void arrived(int peer) {
    if (detailed()) recorder->arrived(peer, !dry, polledAt);
  }

  // Recent calls, to describe a late frame from a peer in mismatch messages.
  void remember(const OpDesc& op) { history_[op.seq % history_.size()] = op; }
  // The call this rank made under `seq`, or null when it is no longer (or never was) recorded:
  // a slot never written holds nothing, so it cannot pass for a call with seq 0.
  const OpDesc* recent(uint64_t seq) const {
    const std::optional<OpDesc>& slot = history_[seq % history_.size()];
    return slot && slot->seq == seq ? &*slot : nullptr;
  }

 private:
  std::array<std::optional<OpDesc>, 16> history_{};
};

}  // namespace chorus::transport
