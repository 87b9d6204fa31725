// The communicator's side of the heartbeat (trace/heartbeat.h): a peer whose progress record went
// stale while this rank waited is declared dead, and the call in progress fails naming it.
#include "core/communicator_impl.h"

#include <chorus/error.hpp>

#include <algorithm>
#include <cstdio>

namespace chorus {

// Shared with the trace service's callback, which may run while the communicator is destroyed:
// the destructor clears `impl` under the lock before anything else goes.
struct Communicator::Impl::SilentSink {
  std::mutex mu;
  Impl* impl = nullptr;
};

void Communicator::Impl::watchHeartbeat() {
  silentSink_ = std::make_shared<SilentSink>();
  silentSink_->impl = this;
  trace_->onSilentPeer = [sink = silentSink_](int peer, double silentSeconds) {
    std::lock_guard<std::mutex> lock(sink->mu);
    if (sink->impl) sink->impl->declareSilent(peer, silentSeconds);
  };
}

void Communicator::Impl::unwatchHeartbeat() {
  if (!silentSink_) return;
  std::lock_guard<std::mutex> lock(silentSink_->mu);
  silentSink_->impl = nullptr;
}

std::string Communicator::Impl::silentReason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return silentReason_;
}

void Communicator::Impl::declareSilent(int peer, double silentSeconds) {
  {
    std::lock_guard<std::mutex> lock(membershipMu_);
    if (std::find(declaredFailed_.begin(), declaredFailed_.end(), peer) == declaredFailed_.end()) {
      declaredFailed_.push_back(peer);
    }
  }
  char text[320];
  std::snprintf(text, sizeof(text),
                "rank %d was declared dead: no heartbeat (progress record) for %.1f s, past the "
                "heartbeat timeout of %g s (CHORUS_HEARTBEAT_SECONDS); it is stopped (SIGSTOP), "
                "frozen or cut off",
                peer, silentSeconds, options.trace.heartbeatSeconds);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (abortCause_ || abortRequested_) return;  // failing already
    silentReason_ = text;
  }
  failWith(Error(ErrorCode::kPeerFailure, "rank " + std::to_string(rank) + ": " + text));
}

}  // namespace chorus
