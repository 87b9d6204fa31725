// Shared-memory rendezvous: which peers of this host exchange data through rings, and the
// mapped segments and ring configuration of each.
#pragma once

#include "common/deadline.h"
#include "transport/job_id.h"
#include "transport/shm/channel.h"
#include "transport/shm/segment.h"

#include <chorus/options.hpp>

#include <string>
#include <vector>

namespace chorus::transport::shm {

// Shared-memory path to one peer on this host.
struct PeerLink {
  int peer = -1;
  Segment peerSegment;  // keeps the peer's mapping (its outgoing ring to this rank)
  ChannelConfig config;
};

struct SharedSetup {
  Segment self;  // this rank's outgoing rings
  std::vector<PeerLink> links;
};

// Every rank creates a segment with one outgoing ring per peer on its host (sparse: nothing is
// allocated but its header until a ring is used) and sends where it is (pid, descriptor, address,
// ring size) to every such peer over their connection; each peer maps it, checks whether it can
// also read the creator's memory directly (single copy), and both sides confirm over the same
// connection, so a pair uses shared memory only when both ends could map it. Every record and
// verdict is sent before any is awaited. fds[p]: a connected socket to peer p (any link kind).
SharedSetup setUp(int rank, const std::vector<std::string>& hosts, const std::vector<int>& fds,
                  const JobId& job, const Options& options, Deadline deadline);

}  // namespace chorus::transport::shm
