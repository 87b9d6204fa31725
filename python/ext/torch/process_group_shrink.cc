// Membership changes of a chorus process group: the survivors of a failure shrink the group in
// place (Chorus's Communicator::shrink agrees on the members), and torch's reconfigure contract
// on top of it where the headers have one. docs/python.md, "Surviving a lost rank".
#include "no_gil.h"
#include "process_group_chorus.h"
#include "signal_abort.h"

#include <chorus/error.hpp>

#include <c10/util/Exception.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

namespace chorus::torch_backend {

namespace {

// Bytes per handle in the exchange that checks reconfigure()'s handles.
constexpr size_t kHandleWidth = 128;

// Where the default group meets in the launcher's store (its keys apart from the launcher's
// own), and the key the launcher reads membership changes from (docs/elastic-launch.md).
constexpr const char* kJobStorePrefix = "torch";
constexpr const char* kLastChangeKey = "chorus/elastic/last_change";

// "a, b, c", for the error of a reconfigure() whose handles are not the members'.
[[maybe_unused]] std::string listed(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::string newReconfigureHandle() {
  char host[64] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown-host");
  std::random_device random;
  std::ostringstream s;
  s << "chorus:" << host << ":" << getpid() << ":" << std::hex << random() << random();
  return s.str().substr(0, kHandleWidth - 1);
}

std::string ProcessGroupChorus::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!comm_) return closed_ ? "the group was shut down" : "";
  const std::exception_ptr cause = comm_->abortCause();
  if (!cause) return "";
  try {
    std::rethrow_exception(cause);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown failure";
  }
}

std::shared_ptr<Store> ProcessGroupChorus::jobStoreFor(const std::vector<int64_t>& globalRanks,
                                                       int size,
                                                       const std::shared_ptr<Store>& launcher) {
  // Only the first default group of the process: one elastic communicator per store, and a
  // replacement's first default group must meet the running job's.
  static std::atomic<bool> usedOnce{false};
  if (!launcher || !globalRanks.empty() || size == 1 || usedOnce.exchange(true)) return nullptr;
  return makePrefixStore(kJobStorePrefix, launcher);
}

void ProcessGroupChorus::announceChange(int rank) const {
  // Rank 0 of the new membership copies the change to where the launcher reads it (chorus-run
  // logs it and kills a rank declared dead that still runs).
  if (rank != 0 || !launcher_) return;
  try {
    const Store::Bytes change = meetStore_->get(kLastChangeKey, std::chrono::seconds(2));
    launcher_->set(kLastChangeKey, change);
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "chorus backend (rank 0): cannot tell the launcher of the membership "
                 "change: %s\n",
                 e.what());
  }
}

bool ProcessGroupChorus::joinsRunningJob(const std::vector<int64_t>& globalRanks, int size) {
  // Only the first default group of the process: later groups are made by every member.
  static std::atomic<bool> joinedOnce{false};
  const char* join = std::getenv("CHORUS_JOIN");
  if (!join || std::string(join) != "1" || !globalRanks.empty() || size == 1) return false;
  return !joinedOnce.exchange(true);
}

bool ProcessGroupChorus::joinPending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return joinOptions_.has_value();
}

MembershipChange ProcessGroupChorus::joinNow() {
  std::optional<chorus::Options> options;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK_VALUE(
        joinOptions_, "chorus backend: join on ", describeGroup(),
        ", which is not a replacement's default group waiting to join (CHORUS_JOIN=1)");
    options = joinOptions_;
  }
#if !CHORUS_TORCH_RECONFIGURE
  TORCH_CHECK(false, "chorus backend: this process is a replacement (CHORUS_JOIN=1) but joining ",
              "a running job needs a torch whose c10d lets a backend's rank and size change ",
              "(C10D_BACKEND_HAS_RECONFIGURE); this module was built for torch ",
              TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR);
  return {};
#else
  const NoGil noGil;
  std::unique_ptr<Communicator> comm;
  try {
    comm = Communicator::join(meetStore_, *options);
  } catch (const Error& e) {
    TORCH_CHECK(false, "chorus backend: joining the running job as a replacement (CHORUS_JOIN=1) ",
                "failed: ", e.what(), " (the running ranks admit newcomers at a membership ",
                "change: chorus.torch.elastic.Trainer looks for them every few steps)");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    comm_ = std::move(comm);
    joinOptions_.reset();
    rank_ = comm_->rank();
    size_ = comm_->size();
  }
  return membership();
#endif
}

MembershipChange ProcessGroupChorus::membership() const {
  const Communicator& comm = communicator("membership");
  MembershipChange m;
  m.generation = comm.generation();
  m.rank = comm.rank();
  m.size = comm.size();
  m.formerRanks = comm.formerRanks();
  return m;
}

int ProcessGroupChorus::joinersWaiting() const {
  return communicator("joiners_waiting").joinersWaiting();
}

int ProcessGroupChorus::sparesWaiting() const {
  return communicator("spares_waiting").sparesWaiting();
}

ProcessGroupChorus::ProcessGroupChorus(std::unique_ptr<Communicator> comm,
                                       const ProcessGroupChorus& parent,
                                       std::vector<int64_t> globalRanks, std::string groupName)
    : BackendBase(comm->rank(), comm->size()),
      store_(makePrefixStore("split/" + groupName, parent.meetStore_)),
      meetStore_(store_),
      timeout_(parent.timeout_),
      globalRanks_(std::move(globalRanks)),
      groupName_(std::move(groupName)),
      comm_(std::move(comm)),
      handle_(newReconfigureHandle()) {
  signalAbort_ = std::make_shared<SignalAbort>(this);
  init();
}

c10::intrusive_ptr<ProcessGroupChorus> ProcessGroupChorus::split(int color, int key,
                                                                 std::vector<int64_t> globalRanks,
                                                                 std::string groupName) {
  std::unique_ptr<Communicator> child;
  try {
    const NoGil noGil;
    child = communicator("split").split(color, key);
  } catch (const Error& e) {
    TORCH_CHECK(false, "chorus backend: splitting ", describeGroup(), " on rank ", getRank(),
                " failed: ", e.what());
  }
  if (!child) return {};
  return c10::make_intrusive<ProcessGroupChorus>(std::move(child), *this, std::move(globalRanks),
                                                 std::move(groupName));
}

std::vector<int> ProcessGroupChorus::failedRanks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return comm_ ? comm_->failedRanks() : std::vector<int>{};
}

MembershipChange ProcessGroupChorus::shrinkInPlace([[maybe_unused]] const std::vector<int>& gone) {
#if !CHORUS_TORCH_RECONFIGURE
  TORCH_CHECK(false, "chorus backend: shrinking ", describeGroup(),
              " in place needs a torch whose ",
              "c10d lets a backend's rank and size change (C10D_BACKEND_HAS_RECONFIGURE in its ",
              "headers); this module was built for torch ", TORCH_VERSION_MAJOR, ".",
              TORCH_VERSION_MINOR, ", which has none (docs/python.md, \"Surviving a lost rank\")");
#else
  // A subgroup follows the default group instead (chorus.torch.shrink rewrites torch's table of
  // its global ranks).
  TORCH_CHECK_VALUE(globalRanks_.empty(), "chorus backend: only the default group can shrink in ",
                    "place, not ", describeGroup(),
                    " (its subgroups follow it: chorus.torch.shrink())");
  {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK_VALUE(!joinOptions_, "chorus backend: shrink on ", describeGroup(),
                      " before this replacement (CHORUS_JOIN=1) joined: call chorus.torch.join()");
    TORCH_CHECK(!closed_ && comm_, "chorus backend: shrink on ", describeGroup(),
                ", which was shut down (destroy_process_group)");
    TORCH_CHECK_VALUE(!coalescing_, "chorus backend: shrink inside a coalescing batch of ",
                      describeGroup());
  }
  const NoGil noGil;
  const int oldSize = getSize();
  const int oldRank = getRank();
  std::unique_ptr<Communicator> next;
  try {
    next = comm_->shrink(gone);  // also ends the calls still in flight on the old communicator
  } catch (const Error& e) {
    TORCH_CHECK(false, "chorus backend: shrinking ", describeGroup(), " on rank ", oldRank,
                " failed: ", e.what());
  }
  MembershipChange change;
  change.generation = next->generation();
  change.rank = next->rank();
  change.size = next->size();
  change.formerRanks = next->formerRanks();
  std::vector<bool> kept(static_cast<size_t>(oldSize));
  for (int f : change.formerRanks) {
    if (f >= 0 && f < oldSize) kept[static_cast<size_t>(f)] = true;
  }
  for (int r = 0; r < oldSize; ++r) {
    if (!kept[static_cast<size_t>(r)]) change.lost.push_back(r);
  }
  std::unique_ptr<Communicator> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = std::move(comm_);
    comm_ = std::move(next);
    lastPart_ = chorus::Work();
    rank_ = change.rank;  // what torch's ProcessGroup reports from now on
    size_ = change.size;
  }
  sequence_ = 0;
  old.reset();  // its connections are closed already; this joins its worker
  announceChange(change.rank);
  return change;
#endif
}

#if CHORUS_TORCH_RECONFIGURE
c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reconfigure(
    const c10d::ReconfigureOptions& opts) {
  TORCH_CHECK_VALUE(std::find(reconfigureUuids_.begin(), reconfigureUuids_.end(), opts.uuid) ==
                        reconfigureUuids_.end(),
                    "chorus backend: reconfigure of ", describeGroup(), ": uuid ", opts.uuid,
                    " was used before on this group; pass a fresh one");
  reconfigureUuids_.push_back(opts.uuid);
  // The group's timeout bounds the agreement (opts.timeout is not used: Chorus's shrink has the
  // communicator's deadline).
  shrinkInPlace();
  // Who the members are now, in rank order.
  std::vector<char> mine(kHandleWidth, 0);
  std::memcpy(mine.data(), handle_.data(), std::min(handle_.size(), kHandleWidth - 1));
  std::vector<char> all(kHandleWidth * static_cast<size_t>(getSize()));
  {
    const NoGil noGil;
    communicator("reconfigure")
        .allGather(mine.data(), all.data(), kHandleWidth, DataType::kU8)
        .wait();
  }
  std::vector<std::string> members;
  for (int r = 0; r < getSize(); ++r) members.emplace_back(all.data() + kHandleWidth * r);
  std::vector<std::string> given;
  bool ordered = false;
  if (const auto* list = std::get_if<std::vector<c10d::ReconfigureHandle>>(&opts.handles)) {
    given = *list;
    ordered = true;
  } else {
    const auto& set = std::get<std::unordered_set<c10d::ReconfigureHandle>>(opts.handles);
    given.assign(set.begin(), set.end());
  }
  std::vector<std::string> sortedMembers = members;
  std::vector<std::string> sortedGiven = given;
  std::sort(sortedMembers.begin(), sortedMembers.end());
  std::sort(sortedGiven.begin(), sortedGiven.end());
  TORCH_CHECK(sortedMembers == sortedGiven, "chorus backend: reconfigure of ", describeGroup(),
              " on rank ", getRank(), ": the live members Chorus agreed on are [", listed(members),
              "] but the handles given are [", listed(given),
              "]; the group now has the agreed members");
  TORCH_CHECK(!ordered || members == given, "chorus backend: reconfigure of ", describeGroup(),
              " on rank ", getRank(), ": Chorus numbers the members itself (survivors keep their ",
              "order); in rank order they are [", listed(members),
              "]: pass the handles as a set, or as a list in that order");
  return barrier(c10d::BarrierOptions());
}
#endif

}  // namespace chorus::torch_backend
