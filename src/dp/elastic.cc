// Elastic mode: a lost rank becomes a membership change instead of the end of training.
#include "dp/replica_impl.h"

#include <algorithm>
#include <numeric>

namespace chorus::dp {

bool Replica::Impl::recoverable(const Error& e) const {
  if (!elastic()) return false;
  switch (e.code()) {
    case ErrorCode::kPeerFailure:
    case ErrorCode::kTimeout:
    case ErrorCode::kAborted:
      return true;
    default:
      return false;
  }
}

void Replica::Impl::discardStep() {
  // The all-reduces still in flight write into our buffers: let them end (they fail promptly,
  // the communicator being aborted) before the buffers are reused.
  for (Bucket& k : buckets) {
    for (Flight& f : k.flight) {
      if (!f.active) continue;
      try {
        f.wait();
      } catch (const Error&) {  // the failure being handled, or one more of its kind
      }
      f.active = false;
    }
  }
  deferredFailure.reset();
  inMicroStep = false;
  micro = 0;
  nextLaunch = 0;
  // In-place buckets may hold a partial average: the step starts over from zero gradients.
  for (Param& p : params) {
    p.ready = false;
    std::fill(p.grad, p.grad + p.count, 0.0f);
  }
}

void Replica::Impl::changeMembership(const std::string& cause) {
  discardStep();
  MembershipChange c;
  c.oldSize = comm->size();
  c.cause = cause;
  // For each rank of the current communicator, its rank before this change (several shrinks
  // when more ranks fail while the state is being copied).
  std::vector<int> origin(static_cast<size_t>(c.oldSize));
  std::iota(origin.begin(), origin.end(), 0);
  std::string why = cause.empty() ? "admitting newcomers" : "after: " + cause;
  for (;;) {
    auto next = withContext("dp step " + std::to_string(steps + 1) + ": membership change " + why,
                            [&] { return comm->shrink(); });
    std::vector<int> former = next->formerRanks();
    for (int& f : former) f = f < 0 ? -1 : origin[static_cast<size_t>(f)];
    origin = std::move(former);
    owned = std::move(next);  // the old communicator was aborted by shrink()
    comm = owned.get();
    if (comm->size() < opt.elastic.minRanks) {
      throw Error(ErrorCode::kPeerFailure,
                  "dp: the membership change left " + std::to_string(comm->size()) +
                      " rank(s), fewer than elastic.minRanks (" +
                      std::to_string(opt.elastic.minRanks) + "); it followed: " + cause);
    }
    try {
      c.stateSource = synchronizeState();
      // Error feedback and PowerSGD's factors belong to the step that was dropped and to the
      // old membership: every rank starts them over (newcomers have none).
      resetCompression();
      break;
    } catch (const Error& e) {
      if (!recoverable(e)) throw;
      why = "after a failure while copying the state: " + std::string(e.what());
    }
  }
  c.newSize = comm->size();
  c.generation = comm->generation();
  c.formerRanks = origin;
  for (int r = 0; r < c.oldSize; ++r) {
    if (std::find(origin.begin(), origin.end(), r) == origin.end()) c.lostRanks.push_back(r);
  }
  c.joined = static_cast<int>(std::count(origin.begin(), origin.end(), -1));
  c.step = steps;
  if (opt.elastic.onChange) opt.elastic.onChange(c);
  throw MembershipChanged(std::move(c));
}

void Replica::Impl::maybeAdmitJoiners() {
  const int every = opt.elastic.admitJoinersEvery;
  if (!elastic() || every == 0 || steps % every != 0) return;
  // Ranks may read the store at different moments: act on the largest count any of them saw.
  int64_t waiting = comm->joinersWaiting();
  guarded([&] {
    withContext("dp step " + std::to_string(steps) + ": agreeing on newcomers", [&] {
      comm->allReduce(&waiting, &waiting, 1, DataType::kI64, ReduceOp::kMax).wait();
    });
  });
  if (waiting > 0) changeMembership("");
}

}  // namespace chorus::dp
