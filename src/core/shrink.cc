// Membership changes: Communicator::shrink, join and their queries (docs/fault-tolerance.md).
// The agreement itself is in membership.cc.
#include "core/connect.h"
#include "core/joiner_liveness.h"
#include "core/launch_env.h"
#include "core/library_version.h"
#include "core/membership.h"
#include "trace/clock.h"
#include "trace/heartbeat.h"
#include "transport/init_line.h"

#include <chorus/error.hpp>

#include <algorithm>
#include <numeric>
#include <thread>
#include <utility>

namespace chorus {

namespace {

// How long shrink() lets calls still in flight on the old communicator finish before it aborts
// them (the caller should have waited for them).
constexpr std::chrono::milliseconds kRetireWait{1000};

std::string joined(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out;
}

std::vector<int> formersOf(const std::vector<membership::Member>& members) {
  std::vector<int> out;
  for (const auto& m : members) out.push_back(m.former);
  return out;
}

// The heartbeat's verdicts on the old communicator's ranks during the agreement: a rank that
// died unseen (no data was due from it) or stopped is not waited for past the heartbeat timeout.
std::function<std::vector<int>()> silentPeersOf(const CommunicatorImpl& im) {
  auto subject = im.traceSubject();
  if (!subject || subject->settings.heartbeatSeconds <= 0 || !subject->rootStore) return {};
  return [subject] { return trace::silentPeers(*subject, trace::wallMicros()); };
}

// How long a newcomer waits to be admitted: the communicator's timeout, or CHORUS_JOIN_WAIT
// seconds where a launcher set it (chorus-run --spares: a spare waits for a hole in the job; 0,
// as long as the job's store answers).
Deadline admissionDeadline(const Options& options) {
  const std::optional<double> seconds = joinWaitSeconds();
  if (!seconds) return Deadline::after(options.timeout);
  if (*seconds == 0) return Deadline::never();
  return Deadline::after(std::chrono::milliseconds(static_cast<int64_t>(*seconds * 1000)));
}

}  // namespace

std::vector<int> Communicator::Impl::declaredFailed() const {
  std::lock_guard<std::mutex> lock(membershipMu_);
  return declaredFailed_;
}

void Communicator::Impl::declareFailed(std::vector<int> ranks) {
  std::lock_guard<std::mutex> lock(membershipMu_);
  declaredFailed_ = std::move(ranks);
}

void Communicator::Impl::retire(const std::string& why, const Deadline& deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  while ((busy_ || !queue_.empty()) && !abortCause_ && !abortRequested_ && !deadline.expired()) {
    // Polls rather than waits on cv_: a notify_one meant for the worker must not land here.
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    lock.lock();
  }
  if (abortCause_ || abortRequested_) return;  // aborted already: its connections are shut
  if (busy_ || !queue_.empty()) {
    lock.unlock();
    requestAbort();
    return;
  }
  abortCause_ = std::make_exception_ptr(Error(ErrorCode::kAborted, why));
  busy_ = true;  // keeps the worker off the transport while it closes
  lock.unlock();
  // A clean goodbye, not an abort: a peer still finishing the last call gets all it is owed.
  if (tx_) tx_->close();
  lock.lock();
  busy_ = false;
}

uint64_t Communicator::generation() const { return impl_->generation; }

std::vector<int> Communicator::failedRanks() const {
  std::vector<int> out = impl_->declaredFailed();
  if (const auto* tx = impl_->transport()) {
    const std::vector<int> seen = tx->failedPeers();
    out.insert(out.end(), seen.begin(), seen.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> Communicator::formerRanks() const {
  if (!impl_->formerRanks.empty()) return impl_->formerRanks;
  std::vector<int> out(static_cast<size_t>(impl_->size));
  std::iota(out.begin(), out.end(), 0);
  return out;
}

int Communicator::joinersWaiting() const {
  if (!impl_->elastic || !impl_->rootStore) return 0;
  return membership::joinersWaiting(*impl_->rootStore, impl_->options.trace.heartbeatSeconds,
                                    impl_->size);
}

int Communicator::sparesWaiting() const {
  if (!impl_->elastic || !impl_->rootStore) return 0;
  const double heartbeat = impl_->options.trace.heartbeatSeconds;
  // Two reads of a queue that may move between them: never below 0.
  return std::max(0, membership::joinersWaiting(*impl_->rootStore, heartbeat) -
                         membership::joinersWaiting(*impl_->rootStore, heartbeat, impl_->size));
}

std::unique_ptr<Communicator> Communicator::shrink() { return shrink(std::vector<int>{}); }

std::unique_ptr<Communicator> Communicator::shrink(const std::vector<int>& gone) {
  Impl& im = *impl_;
  const uint64_t generation = im.generation + 1;
  const std::string where = "shrink (rank " + std::to_string(im.rank) + ", generation " +
                            std::to_string(im.generation) + " to " + std::to_string(generation) +
                            ")";
  if (!im.elastic || !im.rootStore) {
    throw Error(ErrorCode::kInvalidArgument,
                where +
                    ": only a communicator made by create(), fromEnv(), join() or shrink() "
                    "can shrink (not one made by split())");
  }
  const Deadline deadline = Deadline::after(im.options.timeout);
  std::vector<int> knownDead = failedRanks();
  for (int r : gone) {
    if (r >= 0 && r < im.size && r != im.rank) knownDead.push_back(r);
  }
  std::sort(knownDead.begin(), knownDead.end());
  knownDead.erase(std::unique(knownDead.begin(), knownDead.end()), knownDead.end());
  im.retire("communicator was replaced by shrink() (generation " + std::to_string(generation) + ")",
            Deadline::after(std::min(kRetireWait, im.options.timeout / 4)));
  membership::Outcome out;
  try {
    out = membership::agree(im.rootStore, generation, im.size, {im.rank, 0}, knownDead, im.options,
                            im.routeHost, deadline, silentPeersOf(im));
  } catch (const Error& e) {
    throw Error(e.code(), where + ": " + e.what());
  }
  std::vector<bool> kept(static_cast<size_t>(im.size));
  int newcomers = 0;
  for (const auto& m : out.members) {
    if (m.former >= 0) kept[static_cast<size_t>(m.former)] = true;
    newcomers += m.former < 0;
  }
  std::vector<int> lost;
  for (int r = 0; r < im.size; ++r) {
    if (!kept[static_cast<size_t>(r)]) lost.push_back(r);
  }
  im.declareFailed(lost);
  auto& next = *out.impl;
  next.elastic = true;
  next.generation = generation;
  next.formerRanks = formersOf(out.members);
  next.rootStore = im.rootStore;
  next.startTracing(im.rootStore);
  if (next.rank == 0) {
    const std::string change = "generation=" + std::to_string(generation) +
                               " size=" + std::to_string(next.size) +
                               " former=" + joined(next.formerRanks) + " lost=" + joined(lost) +
                               " joined=" + std::to_string(newcomers);
    im.rootStore->set(membership::kLastChangeKey, Store::Bytes(change.begin(), change.end()));
  }
  return std::unique_ptr<Communicator>(new Communicator(std::move(out.impl)));
}

std::unique_ptr<Communicator> Communicator::join(std::shared_ptr<Store> store, Options options) {
  return joinVia(std::move(store), "", std::move(options));
}

std::unique_ptr<Communicator> Communicator::join(const std::string& storeUrl, Options options) {
  auto store = openStore(storeUrl, options.timeout, options.auth);
  return joinVia(std::move(store), routeOf(storeUrl), std::move(options));
}

std::unique_ptr<Communicator> Communicator::joinVia(std::shared_ptr<Store> store,
                                                    const std::string& route, Options options) {
  if (!store) throw Error(ErrorCode::kInvalidArgument, "join: store is null");
  algo::validateAlgorithmSetting(options.algorithm);
  transport::printInitLine(options, -1, 0, libraryVersion());
  const Deadline admitBy = admissionDeadline(options);
  const int64_t ticket = membership::enqueueJoiner(*store);
  const std::string where = "join (newcomer ticket " + std::to_string(ticket) + ")";
  // Its sign of life until it is in: the running ranks neither admit nor wait for it once dead.
  const membership::JoinerBeat beat(store, ticket, options.trace.heartbeatSeconds);
  membership::Outcome out;
  uint64_t generation = 0;
  try {
    auto [g, attempt] = membership::awaitAdmission(*store, ticket, admitBy);
    generation = g;
    out = membership::agreeAsNewcomer(store, generation, attempt, ticket, options, route,
                                      Deadline::after(options.timeout));
  } catch (const Error& e) {
    throw Error(e.code(), where + ": " + e.what());
  }
  auto& next = *out.impl;
  next.elastic = true;
  next.generation = generation;
  next.formerRanks = formersOf(out.members);
  next.rootStore = store;
  next.startTracing(store);
  return std::unique_ptr<Communicator>(new Communicator(std::move(out.impl)));
}

}  // namespace chorus
