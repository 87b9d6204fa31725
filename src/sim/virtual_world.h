// A virtual network inside one process: N ranks run the real algorithm code (algo::run,
// algo::allReduceWith, ...) as cooperative fibers on the calling thread, each over a
// VirtualTransport that matches sends and receives exactly like the real transports do (per
// ordered pair of ranks in post order; a step, size or call mismatch is an error). Nothing can
// hang: when every unfinished rank waits and nothing is in flight, the run fails with a report of
// what each rank waits for.
//
// Two payload modes:
//   kReal: payloads are copied from the sender's buffer into the receiver's when the two match
//     (a send completes then: rendezvous, the strictest order a real transport may impose). Used
//     by the symbolic checker (tests/verify).
//   kDry: no payload is ever touched. Algorithms run on reduce::kSimBytes, whose reductions,
//     divisions and copies only advance the rank's clock, and on addresses from untouchable(),
//     which fault on any access; every Scratch hands out such addresses too. Sends complete
//     when their bytes have left the sender (eager). Used by chorus-sim to predict times.
//
// Time (both modes, though the checker leaves it at zero): every rank has a clock. A send leaves
// when the sender's link is free and arrives alpha + bytes * beta later (plus queueing); a
// receive completes at max(its post time, the arrival); posting a send costs the sender
// `overhead`; a reduction of n bytes advances the rank's clock by gamma * n. Ranks in one host use
// a link of their own per sender (shared memory); between hosts every host has one egress and one
// ingress link (its NIC) that all its ranks' messages go through one after the other. Optionally
// the hosts share a few cores whose work per byte between hosts bounds transfers too (an emulated
// cluster on one machine). Events run in time order.
#pragma once

#include "algo/group.h"

#include <chorus/options.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus::sim {

enum class Payload { kReal, kDry };

// Costs in seconds and seconds per byte; zero everywhere (the default) means no time passes.
struct Network {
  double shmAlpha = 0;  // per message between ranks of one host
  double shmBeta = 0;   // per byte, each sending rank's own copy link
  double netAlpha = 0;  // per message between hosts
  double netBeta = 0;   // per byte through a host's NIC (one egress and one ingress per host)
  double oversubscription = 1;  // divides the bandwidth between hosts
  double overhead = 0;          // per posted send, on the sender's clock (LogP's o)
  double gamma = 0;             // reduction, per byte of result (also division for averages)
  double copy = 0;              // local copy, per byte
  // Cores that every host's network stack shares (0: each host has its own and they are not
  // modelled). Set for hosts that are network namespaces of one machine, as in the emulated
  // cluster: a byte between hosts then also takes netCoreTime of one of these cores (the send and
  // receive sides' kernel work together), and a transfer ends no earlier than that work.
  int sharedCores = 0;
  double netCoreTime = 0;  // seconds of one core per byte between hosts
};

struct WorldConfig {
  int size = 1;
  // Host of every rank (any integers; equal values share a host). Empty: all on one host.
  std::vector<int> hostOf;
  Payload payload = Payload::kReal;
  Network network;
  // Seconds each rank's clock starts late (stragglers). Empty: none.
  std::vector<double> startDelay;
  // segmentBytes, timeout and the thresholds the hierarchical subgroups select with.
  Options options;
  // Stack of each rank's fiber. Overflows hit a guard page (a clear message, then a crash) while
  // the world is small enough for one guard mapping per rank; larger worlds run unguarded.
  size_t stackBytes = 0;  // 0: the default (64 KiB, more under sanitizers)
  // Wall-clock seconds a run may take before it fails (0: no limit).
  double wallLimitSeconds = 0;
};

struct RunResult {
  bool ok = true;
  // The first failure: a rank's exception ("rank 3: ..."), a rank that returned with requests
  // pending, a message nobody received, or the deadlock report.
  std::string error;
  double seconds = 0;              // latest finish time over all ranks
  std::vector<double> finishTime;  // per rank, seconds
  uint64_t messages = 0;
  uint64_t events = 0;  // scheduler events (switches into fibers and timed completions)
};

class VirtualWorld {
 public:
  explicit VirtualWorld(WorldConfig config);
  ~VirtualWorld();
  VirtualWorld(const VirtualWorld&) = delete;
  VirtualWorld& operator=(const VirtualWorld&) = delete;

  int size() const;
  const WorldConfig& config() const;
  // What rank r's algorithms see: its rank, the transport, scratch, and the subgroups by host
  // (Group::hier) when the layout is layered (several hosts, several ranks on some).
  const algo::Group& group(int rank) const;
  bool layered() const;
  // Every peer of every rank on the same host (what Communicator calls allShared).
  bool oneHost() const;

  // Runs body(rank) on every rank, each in its own fiber, until all return, one throws, or no
  // progress is possible. Clocks start at zero (plus startDelay); scratch memory and the
  // hierarchy persist from run to run, as they do in a communicator.
  RunResult run(const std::function<void(int rank)>& body);

  // Dry mode: `bytes` of addresses that fault on any access (shared by all ranks; calls may
  // return overlapping ranges).
  uint8_t* untouchable(size_t bytes);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace chorus::sim
