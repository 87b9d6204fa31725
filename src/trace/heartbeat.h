// The heartbeat: the progress records every rank publishes (service.h) double as its sign of
// life. A rank that has waited in a call for longer than the heartbeat timeout reads its peers'
// records; a peer whose latest record is older than that timeout is not running (stopped with
// SIGSTOP, frozen, cut off) and is reported, so that the communicator fails the call naming it
// instead of waiting out the collective timeout (docs/fault-tolerance.md, "Heartbeat").
#pragma once

#include "trace/subject.h"

#include <cstdint>
#include <vector>

namespace chorus::trace {

// How often the records are published when the heartbeat is on: often enough that a live
// peer's record is never near the timeout.
double publishPeriodSeconds(const Settings& s);

// Runs on the service thread, about once per publish period: when a call of `subject` has been
// pending for at least the heartbeat timeout at `nowUs` (wall clock), reads the peers' records
// (each with a short deadline, one second in all) and calls subject.onSilentPeer once for each
// peer whose record is older than the timeout. A peer with no record yet counts as having
// published when this rank's records started (Subject::recordsSinceUs).
void checkHeartbeats(Subject& subject, uint64_t nowUs);

// The peers whose latest record is older than the heartbeat timeout at `nowUs`, whatever this
// rank is doing (for the membership agreement, which need not wait for them). Empty when the
// heartbeat is off; a peer with no record is judged as above. Reads for one second at most.
std::vector<int> silentPeers(const Subject& subject, uint64_t nowUs);

}  // namespace chorus::trace
