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
  trace_->onStalledPeer = [sink = silentSink_](int peer, double idleSeconds) {
    std::lock_guard<std::mutex> lock(sink->mu);
    if (sink->impl) sink->impl->declareStalled(peer, idleSeconds);
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
  char text[320];
  std::snprintf(text, sizeof(text),
                "rank %d was declared dead: no heartbeat (progress record) for %.1f s, past the "
                "heartbeat timeout of %g s (CHORUS_HEARTBEAT_SECONDS); it is stopped (SIGSTOP), "
                "frozen or cut off",
                peer, silentSeconds, options.trace.heartbeatSeconds);
  declareDead(peer, text);
}

void Communicator::Impl::declareStalled(int peer, double idleSeconds) {
  char text[400];
  std::snprintf(text, sizeof(text),
                "rank %d was declared dead: alive but in no collective for %.1f s while this rank "
                "waited for it, past the stall timeout of %g s; its loop is stuck outside the "
                "collectives (a data loader?) or paused without saying so (setPaused)",
                peer, idleSeconds, trace_->stallSeconds.load(std::memory_order_relaxed));
  declareDead(peer, text);
}

void Communicator::Impl::declareDead(int peer, const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(membershipMu_);
    if (std::find(declaredFailed_.begin(), declaredFailed_.end(), peer) == declaredFailed_.end()) {
      declaredFailed_.push_back(peer);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (abortCause_ || abortRequested_) return;  // failing already
    silentReason_ = text;
  }
  failWith(Error(ErrorCode::kPeerFailure, "rank " + std::to_string(rank) + ": " + text));
}

void Communicator::setStallTimeout(double seconds) {
  if (!(seconds >= 0) || seconds > 86400) {
    throw Error(ErrorCode::kInvalidArgument,
                "setStallTimeout: " + std::to_string(seconds) + " is not in [0, 86400] seconds");
  }
  auto subject = impl_->traceSubject();
  if (seconds > 0 && (!subject || subject->settings.heartbeatSeconds <= 0 || !subject->rootStore ||
                      !subject->onStalledPeer)) {
    throw Error(ErrorCode::kInvalidArgument,
                "setStallTimeout: the stall check needs the heartbeat (CHORUS_HEARTBEAT_SECONDS "
                "above 0, with the progress records on), which is off on this communicator");
  }
  if (subject) subject->stallSeconds.store(seconds, std::memory_order_relaxed);
}

void Communicator::setPaused(bool paused) {
  if (auto subject = impl_->traceSubject())
    subject->paused.store(paused, std::memory_order_relaxed);
}

}  // namespace chorus
