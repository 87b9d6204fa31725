// A peer on this host: data through shared-memory rings (a Channel), control through another
// link of the same peer (wake-ups, the reason of an abort, the end of the peer's process).
#pragma once

#include "transport/link.h"
#include "transport/op_state.h"
#include "transport/shm/channel.h"
#include "transport/shm/segment.h"
#include "transport/shm/setup.h"

namespace chorus::transport::shm {

class ShmLink final : public Link {
 public:
  ShmLink(PeerLink setup, Link& control, OpState& op)
      : segment_(std::move(setup.peerSegment)),
        channel_(setup.config, op),
        control_(control),
        op_(op) {}

  const char* kind() const override { return "shm"; }
  void postSend(Request& r) override;
  void postRecv(Request& r) override { channel_.postRecv(r); }  // taken by the next pump
  bool holdsSend(const Request* r) const override { return channel_.holdsSend(r); }
  void clear() noexcept override { channel_.clear(); }
  bool peerLeft() const override { return control_.peerLeft(); }
  void throwPeerLeft() override { control_.throwPeerLeft(); }
  void wakePeer() noexcept override { control_.wakePeer(); }
  void throwPeerAbort() override { control_.throwPeerAbort(); }

  bool busy() const { return channel_.sending() || channel_.receiving(); }
  // Moves what it can without blocking; true when bytes moved or a request finished. Throws when
  // the peer aborted, or left while this rank still exchanges data with it.
  bool progress();

 private:
  bool pump();

  Segment segment_;  // keeps the peer's mapping (its outgoing ring to this rank)
  Channel channel_;
  Link& control_;
  OpState& op_;
};

}  // namespace chorus::transport::shm
