// The membership agreement behind Communicator::shrink and join (docs/fault-tolerance.md): the
// members of the next communicator agree on who they are through the job's root store, then
// connect through keys unique to that agreement.
#pragma once

#include "common/deadline.h"
#include "core/communicator_impl.h"
#include "core/elastic_keys.h"

#include <chorus/store.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus::membership {

// Keys under the root store's "chorus/elastic/" that launchers read or write too.
using elastic_keys::kExpectedJoinersKey;
using elastic_keys::kLastChangeKey;
using elastic_keys::kMaxSizeKey;
using elastic_keys::kRestartsLeftKey;

// One member of the next communicator.
struct Member {
  int former = -1;     // rank in the communicator being replaced; -1 for a newcomer
  int64_t ticket = 0;  // a newcomer's place in the queue of joiners (0 for a survivor)
};

// Who is taking part: a survivor of the communicator being replaced (its rank there), or a
// newcomer (its ticket from enqueueJoiner).
struct Participant {
  int rank = -1;
  int64_t ticket = 0;
};

// The outcome: the connected communicator and who is in it, in new-rank order.
struct Outcome {
  std::unique_ptr<CommunicatorImpl> impl;
  std::vector<Member> members;
};

// Runs the agreement for generation `generation` (the communicator being replaced has
// `oldSize` ranks and generation - 1), retrying with the members that remain when one is lost
// while connecting, until connected or `deadline`. knownDead: ranks of the old communicator
// this participant knows to be dead. Throws Error(kPeerFailure, "... declared dead ...") when
// the agreement left this participant out.
// silent (may be empty): ranks of the old communicator its heartbeat finds silent now
// (trace/heartbeat.h); asked now and then while waiting for registrations, which need not wait
// for those.
Outcome agree(const std::shared_ptr<Store>& root, uint64_t generation, int oldSize,
              const Participant& self, const std::vector<int>& knownDead, const Options& options,
              const std::string& route, const Deadline& deadline,
              const std::function<std::vector<int>()>& silent = {});

// A newcomer takes a ticket and waits for the agreement that admits it: returns its generation
// and the attempt (as "generation attempt"); throws Error(kTimeout) at the deadline, and then
// withdraws the ticket, or Error(kPeerFailure) when a decision passed it over (its sign of life,
// joiner_liveness.h, was stale). Decisions (with the heartbeat on) leave out newcomers whose
// sign of life is stale.
int64_t enqueueJoiner(Store& root);
std::pair<uint64_t, int> awaitAdmission(Store& root, int64_t ticket, const Deadline& deadline);
Outcome agreeAsNewcomer(const std::shared_ptr<Store>& root, uint64_t generation, int attempt,
                        int64_t ticket, const Options& options, const std::string& route,
                        const Deadline& deadline);

// Newcomers registered and not admitted yet, less those whose sign of life is older than
// heartbeatSeconds (joiner_liveness.h; none left out when it is 0). size >= 0: the members
// now, and at most as many as the launcher's cap (kMaxSizeKey) leaves room for are counted
// (spares beyond it wait for a hole).
int joinersWaiting(Store& root, double heartbeatSeconds = 0, int size = -1);

// Test hook: called with the participant's rank (or -1 for a newcomer) right after it
// registered for an attempt; a throw there makes that participant vanish mid-agreement.
void setAfterRegisterHookForTesting(std::function<void(int rank)> hook);

}  // namespace chorus::membership
