// A newcomer's sign of life during a membership change (docs/fault-tolerance.md, "Heartbeat"):
// from the moment it queues until it is in, a joining process stamps its ticket's key with the
// wall clock, so that the running ranks neither admit a replacement that died while it waited,
// nor wait for one that died after they admitted it longer than the heartbeat timeout.
#pragma once

#include <chorus/store.hpp>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace chorus::membership {

// Stamps chorus/elastic/joiner_seen/<ticket> now and then (four times per heartbeat timeout, at
// least once a second) on a thread of its own until destroyed. Nothing when the heartbeat is
// off (heartbeatSeconds <= 0).
class JoinerBeat {
 public:
  JoinerBeat(std::shared_ptr<Store> root, int64_t ticket, double heartbeatSeconds);
  ~JoinerBeat();
  JoinerBeat(const JoinerBeat&) = delete;
  JoinerBeat& operator=(const JoinerBeat&) = delete;

 private:
  void run();
  void stamp();

  std::shared_ptr<Store> root_;
  const int64_t ticket_;
  const double periodSeconds_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// False when newcomer `ticket` stamped its key, but longer than heartbeatSeconds ago: it died or
// was cut off. True when the heartbeat is off, when it never stamped (a newcomer that does not),
// or when the store does not answer (no verdict from that).
bool joinerAlive(Store& root, int64_t ticket, double heartbeatSeconds);

// `inner` with its waits (get, wait, getMany) cut into slices of a quarter second, between which
// deadMember() is asked: when it names a member ("" otherwise), the wait fails at once with
// Error(kPeerFailure, "<name> is gone ..."), so that connecting to a member that died does not
// take the rest of the deadline.
std::shared_ptr<Store> watchingMembers(std::shared_ptr<Store> inner,
                                       std::function<std::string()> deadMember);

}  // namespace chorus::membership
