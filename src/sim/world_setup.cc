// Building a virtual world from its WorldConfig: the network's costs in picoseconds, the hosts
// and their topology, and every rank's transport, scratch, group and hierarchy. In dry mode the
// simulated-bytes kernels are installed here: they touch no payload and only charge the running
// rank's clock.
#include "reduce/internal_types.h"
#include "sim/world_impl.h"

#include <chorus/error.hpp>

#include <algorithm>
#include <memory>
#include <string>

namespace chorus::sim {

namespace {

void simReduce(void*, const void*, const void*, size_t count) {
  if (t_world) t_world->charge(t_world->gammaPs * static_cast<double>(count));
}
void simDivide(void*, size_t count, int) {
  if (t_world) t_world->charge(t_world->gammaPs * static_cast<double>(count));
}
void simCopy(void*, const void*, size_t bytes) {
  if (t_world) t_world->charge(t_world->copyPs * static_cast<double>(bytes));
}

}  // namespace

VirtualWorld::Impl::Impl(WorldConfig c) : cfg(std::move(c)) {
  n = cfg.size;
  if (n < 1) throw Error(ErrorCode::kInvalidArgument, "chorus sim: world size must be >= 1");
  if (!cfg.hostOf.empty() && cfg.hostOf.size() != static_cast<size_t>(n)) {
    throw Error(ErrorCode::kInvalidArgument, "chorus sim: hostOf needs one entry per rank");
  }
  if (!cfg.startDelay.empty() && cfg.startDelay.size() != static_cast<size_t>(n)) {
    throw Error(ErrorCode::kInvalidArgument, "chorus sim: startDelay needs one entry per rank");
  }
  dry = cfg.payload == Payload::kDry;
  const Network& net = cfg.network;
  shmAlphaPs = toPs(net.shmAlpha);
  netAlphaPs = toPs(net.netAlpha);
  overheadPs = toPs(net.overhead);
  shmBetaPs = net.shmBeta * 1e12;
  netBetaPs = net.netBeta * 1e12 * std::max(1.0, net.oversubscription);
  gammaPs = net.gamma * 1e12;
  copyPs = net.copy * 1e12;
  if (net.sharedCores < 0 || net.netCoreTime < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "chorus sim: sharedCores and netCoreTime must be >= 0");
  }
  if (net.sharedCores > 0 && net.netCoreTime > 0) {
    coreBetaPs = net.netCoreTime * 1e12;
    coreFree.assign(static_cast<size_t>(net.sharedCores), 0);
  }
  timed = shmAlphaPs || netAlphaPs || overheadPs || shmBetaPs > 0 || netBetaPs > 0 || gammaPs > 0 ||
          copyPs > 0 || coreBetaPs > 0 ||
          std::any_of(cfg.startDelay.begin(), cfg.startDelay.end(), [](double d) { return d > 0; });

  // Hosts: index them by first appearance, as topologyOf does.
  hostIds.resize(static_cast<size_t>(n));
  hostIndex.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const int h = cfg.hostOf.empty() ? 0 : cfg.hostOf[static_cast<size_t>(r)];
    hostIds[static_cast<size_t>(r)] = "host" + std::to_string(h);
  }
  topo = std::make_shared<const algo::Topology>(algo::topologyOf(hostIds));
  for (int r = 0; r < n; ++r)
    hostIndex[static_cast<size_t>(r)] = topo->hostOf[static_cast<size_t>(r)];
  layered = topo->layered();
  oneHost = topo->hostCount() == 1;
  egressFree.assign(static_cast<size_t>(topo->hostCount()), 0);
  ingressFree.assign(static_cast<size_t>(topo->hostCount()), 0);

  installFaultHandler();
  if (dry) {
    reduce::InternalKernels k;
    k.reduce = &simReduce;
    k.divide = &simDivide;
    k.copy = &simCopy;
    reduce::setInternalKernels(reduce::kSimBytes, k);
  }

  ranks.reset(new Rank[static_cast<size_t>(n)]);
  for (int r = 0; r < n; ++r) {
    Rank& k = ranks[static_cast<size_t>(r)];
    k.index = r;
    k.tx = std::make_unique<VirtualTransport>(this, &k);
    if (dry) k.scratch.reserveFrom(&reserveUntouchable);
    k.group.rank = r;
    k.group.size = n;
    k.group.tx = k.tx.get();
    k.group.scratch = &k.scratch;
    k.group.timeout = cfg.options.timeout;
    k.group.segmentBytes = cfg.options.segmentBytes;
    k.group.ringBidirectionalBytes = static_cast<size_t>(cfg.options.tuning.ringBidirectionalBytes);
    if (layered) {
      k.hier = algo::makeHierarchy(k.group, topo, cfg.options);
      if (dry) {
        k.hier->localScratch.reserveFrom(&reserveUntouchable);
        k.hier->crossScratch.reserveFrom(&reserveUntouchable);
      }
      k.group.hier = k.hier.get();
    }
  }
  const size_t stack = cfg.stackBytes ? cfg.stackBytes : kDefaultStackBytes;
  stacks = std::make_unique<StackPool>(n, stack, n <= kMaxGuardedRanks);
}

}  // namespace chorus::sim
