// The subgroups of a communicator that spans several hosts: this rank's host, and the ranks
// that carry this rank's share of the traffic between hosts.
#pragma once

#include "algo/group.h"
#include "algo/sub_transport.h"
#include "algo/topology.h"

#include <chorus/options.hpp>

#include <memory>

namespace chorus::algo {

struct Hierarchy {
  std::shared_ptr<const Topology> topo;  // shared by the ranks of a simulated world (src/sim)
  int hostIndex = 0;
  // The ranks of this host, in rank order.
  std::unique_ptr<SubTransport> localTx;
  Group local;
  // Even layout: local rank j of every host (each pair of hosts exchanges L slices in
  // parallel). Uneven layout: local rank 0 of every host (the host's leader); empty elsewhere.
  std::unique_ptr<SubTransport> crossTx;
  Group cross;
  bool inCross = false;
  // Thresholds for the algorithm chosen inside the subgroups (always automatic there).
  Options subOptions;
  // Each subgroup reduces into its own slots: their rings run interleaved.
  Scratch localScratch;
  Scratch crossScratch;
};

// Builds the subgroups of g from every rank's host id; nullptr when the layout is flat.
std::unique_ptr<Hierarchy> makeHierarchy(const Group& g, const std::vector<std::string>& hostIds,
                                         const Options& options);
// Same from the topology of those ids (topologyOf), which many ranks may share.
std::unique_ptr<Hierarchy> makeHierarchy(const Group& g, std::shared_ptr<const Topology> topo,
                                         const Options& options);

}  // namespace chorus::algo
