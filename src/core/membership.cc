// The membership agreement (docs/fault-tolerance.md, "Protocol"). Keys, all under the root
// store's "chorus/elastic/":
//   g<G>/a<A>/reg/<slot>   a participant of attempt A of generation G is here (value: the slots
//                          it knows to be dead)
//   g<G>/a<A>/decider      counter: the participant that moves it to 1 writes the decision (a
//                          store with compare-and-set: the first participant to write it does)
//   g<G>/a<A>/decision     the members, one line each: "<slot> <former rank> <ticket>", then
//                          "consumed <ticket>"
//   g<G>/a<A>/comm/...     the new communicator's rendezvous (fresh keys for every attempt)
//   g<G>/a<A>/connected/<r>, elect, outcome   whether every member connected: "commit", or
//                          "abandon" (then the members run attempt A + 1); elected as the
//                          decision is
//   joiners                counter: tickets handed to newcomers
//   joiner/<t>, withdrawn/<t>, admitted/<t> ("<G> <A>")   one newcomer's queue entry
//   admitted               tickets consumed by decisions so far
//   expected_joiners, restarts_left, max_size   written by a launcher (replacements announced;
//                          restarts it has left; the most members a decision may have: spares
//                          beyond it stay queued)
// Slots of attempt 0 are the ranks of the communicator being replaced; those of attempt A > 0
// the ranks of attempt A - 1's decision.
#include "core/membership.h"

#include "core/connect.h"
#include "core/joiner_liveness.h"
#include "store/compare_set.h"
#include "store/store_util.h"

#include <chorus/error.hpp>

#include <unistd.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace chorus::membership {
namespace {

const std::string kRoot = elastic_keys::kRoot;
const std::string kTicketsKey = elastic_keys::kJoinerTicketsKey;
const std::string kConsumedKey = kRoot + "admitted";

std::string attemptKey(uint64_t generation, int attempt) {
  return kRoot + "g" + std::to_string(generation) + "/a" + std::to_string(attempt) + "/";
}
std::string joinerKey(int64_t t) { return elastic_keys::joinerKey(t); }
std::string withdrawnKey(int64_t t) { return kRoot + "withdrawn/" + std::to_string(t); }
std::string admittedKey(int64_t t) { return elastic_keys::admittedKey(t); }

std::string text(const Store::Bytes& b) { return std::string(b.begin(), b.end()); }
Store::Bytes bytes(const std::string& s) { return Store::Bytes(s.begin(), s.end()); }
bool has(Store& s, const std::string& key) { return s.check({key}); }
// The launcher's cap on the members (kMaxSizeKey); no cap without the key.
int64_t maxSize(Store& root) {
  if (!has(root, kMaxSizeKey)) return std::numeric_limits<int64_t>::max();
  try {
    return std::stoll(text(root.get(kMaxSizeKey, std::chrono::seconds(5))));
  } catch (const std::logic_error&) {
    return std::numeric_limits<int64_t>::max();  // not a number: not a launcher this code knows
  }
}

std::chrono::milliseconds left(const Deadline& d) {
  return std::chrono::milliseconds(d.remainingMs());
}

// Half of what is left: each phase that may wait for a rank that never comes (registration,
// connection) leaves time for the attempt after it.
Deadline halfway(const Deadline& deadline) {
  return Deadline(std::min(deadline.at(), Clock::now() + (deadline.at() - Clock::now()) / 2));
}

// left - left / 3, not left * 2 / 3: left * 2 overflows for Deadline::never().
Deadline twoThirds(const Deadline& deadline) {
  const auto left = deadline.at() - Clock::now();
  return Deadline(std::min(deadline.at(), Clock::now() + (left - left / 3)));
}

std::mutex hookMu;
std::function<void(int)> afterRegisterHook;

void afterRegister(int rank) {
  std::function<void(int)> hook;
  {
    std::lock_guard<std::mutex> lock(hookMu);
    hook = afterRegisterHook;
  }
  if (hook) hook(rank);
}

struct Decision {
  std::vector<int> slots;  // per member: its slot in the attempt, -1 for a newcomer
  std::vector<Member> members;
  int64_t consumedTo = 0;  // the newcomers' tickets looked at, withdrawn ones included
};

std::string encode(const Decision& d) {
  std::string out;
  for (size_t i = 0; i < d.members.size(); ++i) {
    out += std::to_string(d.slots[i]) + " " + std::to_string(d.members[i].former) + " " +
           std::to_string(d.members[i].ticket) + "\n";
  }
  return out + "consumed " + std::to_string(d.consumedTo) + "\n";
}

Decision decode(const std::string& s) {
  Decision d;
  std::istringstream lines(s);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    int slot, former;
    int64_t ticket;
    if (line.rfind("consumed ", 0) == 0) {
      d.consumedTo = std::stoll(line.substr(9));
    } else if (in >> slot >> former >> ticket) {
      d.slots.push_back(slot);
      d.members.push_back({former, ticket});
    }
  }
  return d;
}

std::string encodeInts(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += std::to_string(x) + " ";
  return out;
}

std::vector<int> decodeInts(const std::string& s) {
  std::vector<int> out;
  std::istringstream in(s);
  int x;
  while (in >> x) out.push_back(x);
  return out;
}

void pause(int& ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  ms = std::min(ms * 2, 20);
}

// True when the newcomers announced so far have all registered (their records, not only their
// tickets: decide() admits a ticket once its record is there).
bool expectedJoinersIn(Store& root) {
  const int64_t expected = root.add(kExpectedJoinersKey, 0);
  for (int64_t t = root.add(kConsumedKey, 0) + 1; t <= expected; ++t) {
    if (!has(root, joinerKey(t))) return false;
  }
  return true;
}

// The most the decider waits for a launcher to announce the replacements of the ranks lost in
// an attempt (it sees the deaths at the same moment as the survivors).
constexpr std::chrono::seconds kReplacementGrace{2};

// Before the decision: when a launcher restarts lost ranks (it publishes the restarts it has
// left) and slots of this attempt did not register, waits until it announced a replacement for
// each (or has no restarts left) and the announced ones registered, so that they are admitted
// now and not at the next membership change; at most kReplacementGrace and `until`. Without the
// key (no such launcher) it does not wait.
void awaitReplacements(Store& root, const std::string& at, int slots, const Deadline& until) {
  if (!has(root, kRestartsLeftKey)) return;
  const Deadline grace(std::min(until.at(), Clock::now() + kReplacementGrace));
  int pauseMs = 1;
  for (;;) {
    int lost = 0;
    for (int i = 0; i < slots; ++i) lost += !has(root, at + "reg/" + std::to_string(i));
    if (lost == 0) return;
    // Read before the announcements: the launcher announces a replacement, then lowers this.
    int64_t restartsLeft = 0;
    try {
      restartsLeft = std::stoll(text(root.get(kRestartsLeftKey, std::chrono::seconds(5))));
    } catch (const std::logic_error&) {
      return;  // not a number: not a launcher this code knows
    }
    const int64_t announced = root.add(kExpectedJoinersKey, 0) - root.add(kConsumedKey, 0);
    if ((restartsLeft <= 0 || announced >= lost) && expectedJoinersIn(root)) return;
    if (grace.expired()) return;
    pause(pauseMs);
  }
}

constexpr std::chrono::milliseconds kSilentCheckPeriod{250};

// Waits until every slot has registered or is known dead (by this participant or by one that
// registered) and the joiners a launcher announced have come; or until someone decided, or
// `until`.
void awaitRegistrations(Store& root, const std::string& at, int slots, std::vector<bool> dead,
                        const Deadline& until,
                        const std::function<void(std::vector<bool>&)>& silent) {
  std::vector<bool> seen(static_cast<size_t>(slots));
  int pauseMs = 1;
  // The heartbeat's verdicts (records age by the publish period at most): every quarter second.
  auto nextSilentCheck = Clock::now() + kSilentCheckPeriod;
  for (;;) {
    if (silent && Clock::now() >= nextSilentCheck) {
      silent(dead);
      nextSilentCheck = Clock::now() + kSilentCheckPeriod;
    }
    for (int i = 0; i < slots; ++i) {
      const std::string key = at + "reg/" + std::to_string(i);
      if (seen[static_cast<size_t>(i)] || !has(root, key)) continue;
      seen[static_cast<size_t>(i)] = true;
      for (int d : decodeInts(text(root.get(key, std::chrono::seconds(5))))) {
        if (d >= 0 && d < slots) dead[static_cast<size_t>(d)] = true;
      }
    }
    bool covered = true;
    for (size_t i = 0; i < seen.size(); ++i) covered = covered && (seen[i] || dead[i]);
    if (covered && expectedJoinersIn(root)) return;
    if (has(root, at + "decision") || until.expired()) return;
    pause(pauseMs);
  }
}

// Waits until every member of the attempt reported its connections made, or the outcome is out,
// or `until`; true in the first case.
bool everyoneConnected(Store& root, const std::string& at, int size, const Deadline& until) {
  std::vector<char> seen(static_cast<size_t>(size));
  int pauseMs = 1;
  for (;;) {
    bool all = true;
    for (int r = 0; r < size; ++r) {
      char& s = seen[static_cast<size_t>(r)];
      s = s || has(root, at + "connected/" + std::to_string(r));
      all = all && s;
    }
    if (all) return true;
    if (has(root, at + "outcome") || until.expired()) return false;
    pause(pauseMs);
  }
}

// The decision this participant would take now: the slots registered, then the newcomers
// waiting, in ticket order. Reads only.
Decision propose(Store& root, const std::string& at, const std::vector<Member>& base,
                 double heartbeatSeconds) {
  Decision d;
  for (size_t i = 0; i < base.size(); ++i) {
    if (has(root, at + "reg/" + std::to_string(i))) {
      d.slots.push_back(static_cast<int>(i));
      d.members.push_back(base[i]);
    }
  }
  const int64_t consumed = root.add(kConsumedKey, 0);
  const int64_t issued = root.add(kTicketsKey, 0);
  const int64_t room = maxSize(root) - static_cast<int64_t>(d.members.size());
  d.consumedTo = consumed;
  int64_t admitted = 0;
  for (int64_t t = consumed + 1; t <= issued && has(root, joinerKey(t)) && admitted < room; ++t) {
    d.consumedTo = t;
    if (has(root, withdrawnKey(t))) continue;
    // Died while it waited (its sign of life went stale): passed over, and consumed.
    if (!joinerAlive(root, t, heartbeatSeconds)) continue;
    d.slots.push_back(-1);
    d.members.push_back({-1, t});
    ++admitted;
  }
  return d;
}

// What a decision does to the newcomers' queue: each admitted newcomer learns its attempt, and
// the tickets looked at are consumed. With compare-and-set every participant applies the
// decision that won (its proposer may be gone), so each step is idempotent: the same admission,
// and the consumed count raised (never added to).
void apply(Store& root, const Decision& d, uint64_t generation, int attempt,
           store::ComparesAndSets* cas) {
  for (size_t i = 0; i < d.members.size(); ++i) {
    if (d.slots[i] >= 0) continue;
    root.set(admittedKey(d.members[i].ticket),
             bytes(std::to_string(generation) + " " + std::to_string(attempt)));
  }
  int64_t consumed = root.add(kConsumedKey, 0);
  if (cas == nullptr) {
    if (d.consumedTo > consumed) root.add(kConsumedKey, d.consumedTo - consumed);
    return;
  }
  while (d.consumedTo > consumed) {
    auto r = cas->compareSet(kConsumedKey, store::formatCounter(consumed),
                             store::formatCounter(d.consumedTo));
    if (r.swapped || !r.current) break;
    consumed = store::parseCounter(kConsumedKey, *r.current);
  }
}

// Without compare-and-set: the one elected decider writes the decision, after its effects.
void decide(Store& root, const std::string& at, const std::vector<Member>& base,
            uint64_t generation, int attempt, double heartbeatSeconds) {
  const Decision d = propose(root, at, base, heartbeatSeconds);
  apply(root, d, generation, attempt, nullptr);
  root.set(at + "decision", bytes(encode(d)));
}

// Names a member of `members` that is gone by its heartbeat ("" while none is): a rank of the
// communicator being replaced that `silent` reports, or a newcomer whose sign of life is stale.
std::function<std::string()> deadMemberOf(Store& root, const std::vector<Member>& members,
                                          double heartbeat,
                                          const std::function<std::vector<int>()>& silent) {
  return [&root, members, heartbeat, silent]() -> std::string {
    for (int r : silent ? silent() : std::vector<int>{}) {
      for (const auto& m : members) {
        if (m.former == r) return "rank " + std::to_string(r) + " of the communicator replaced";
      }
    }
    for (const auto& m : members) {
      if (m.former < 0 && !joinerAlive(root, m.ticket, heartbeat)) {
        return "the newcomer with ticket " + std::to_string(m.ticket);
      }
    }
    return "";
  };
}

// Attempts from `attempt` on, with `base` the members of its slots; the participant is slot
// `slot` of it, or (slot -1, first attempt only) the newcomer with `ticket`.
Outcome runAttempts(const std::shared_ptr<Store>& root, uint64_t generation, int attempt,
                    std::vector<Member> base, int slot, int64_t ticket, std::vector<int> knownDead,
                    const Options& options, const std::string& route, const Deadline& deadline,
                    const std::function<std::vector<int>()>& silent = {}) {
  const int oldRank = slot >= 0 ? base[static_cast<size_t>(slot)].former : -1;
  // With compare-and-set (etcd, the in-process store) every participant proposes and the first
  // proposal stands: no elected decider can die between winning and writing. Without it (TCP,
  // file), one participant elected by a counter decides.
  store::ComparesAndSets* const cas = store::compareSetOf(*root);
  const double heartbeat = options.trace.heartbeatSeconds;
  std::string lastFailure;
  for (;; ++attempt) {
    const std::string at = attemptKey(generation, attempt);
    if (slot >= 0) {
      root->set(at + "reg/" + std::to_string(slot), bytes(encodeInts(knownDead)));
      afterRegister(oldRank);
      std::vector<bool> deadSlots(base.size());
      for (int d : knownDead) {
        if (d >= 0 && d < static_cast<int>(base.size())) deadSlots[static_cast<size_t>(d)] = true;
      }
      std::function<void(std::vector<bool>&)> markSilent;
      if (silent || heartbeat > 0) {
        markSilent = [&](std::vector<bool>& dead) {
          for (int r : silent ? silent() : std::vector<int>{}) {
            for (size_t i = 0; i < base.size(); ++i) {
              if (base[i].former == r && base[i].former >= 0) dead[i] = true;
            }
          }
          // A newcomer admitted by the attempt before, dead since.
          for (size_t i = 0; i < base.size(); ++i) {
            if (base[i].former < 0 && !joinerAlive(*root, base[i].ticket, heartbeat)) {
              dead[i] = true;
            }
          }
        };
      }
      awaitRegistrations(*root, at, static_cast<int>(base.size()), deadSlots, halfway(deadline),
                         markSilent);
      if (cas != nullptr && !has(*root, at + "decision")) {
        awaitReplacements(*root, at, static_cast<int>(base.size()), halfway(deadline));
        if (!has(*root, at + "decision")) {
          cas->compareSet(at + "decision", std::nullopt,
                          bytes(encode(propose(*root, at, base, heartbeat))));
        }
      } else if (cas == nullptr && !has(*root, at + "decision") &&
                 root->add(at + "decider", 1) == 1) {
        awaitReplacements(*root, at, static_cast<int>(base.size()), halfway(deadline));
        decide(*root, at, base, generation, attempt, heartbeat);
      }
    }
    Decision d;
    try {
      d = decode(text(root->get(at + "decision", left(deadline))));
    } catch (const Error& e) {
      throw Error(e.code(),
                  "no agreement on the members of generation " + std::to_string(generation) +
                      " (attempt " + std::to_string(attempt) + ")" +
                      (lastFailure.empty() ? "" : " after " + lastFailure) + ": " + e.what());
    }
    if (cas != nullptr) apply(*root, d, generation, attempt, cas);
    int me = -1;
    for (size_t i = 0; i < d.members.size() && me < 0; ++i) {
      if (slot >= 0 ? d.slots[i] == slot : (d.slots[i] < 0 && d.members[i].ticket == ticket)) {
        me = static_cast<int>(i);
      }
    }
    if (me < 0) {
      const std::string who = oldRank >= 0 ? "rank " + std::to_string(oldRank)
                                           : "the newcomer with ticket " + std::to_string(ticket);
      throw Error(ErrorCode::kPeerFailure,
                  who +
                      " was declared dead by the survivors: it came too late to the agreement on "
                      "the members of generation " +
                      std::to_string(generation) + " (attempt " + std::to_string(attempt) +
                      "), which went on without it");
    }
    const int size = static_cast<int>(d.members.size());
    // The others gave up on this attempt already: follow them.
    if (!has(*root, attemptKey(generation, attempt + 1) + "decision")) {
      std::unique_ptr<CommunicatorImpl> impl;
      try {
        // A member that died after the decision (a replacement that never connects, a rank
        // whose heartbeat stopped) fails the connection at once, not at the deadline.
        // A newcomer publishes its address first thing when it connects: a survivor waits for
        // the newcomers' addresses through the watched store, which finds a dead one before
        // the accept that would wait for it. (Survivors do not wait so for one another: each
        // publishes its own address only once it connects.)
        auto watched = watchingMembers(makePrefixStore(at + "comm", root),
                                       deadMemberOf(*root, d.members, heartbeat, silent));
        const Deadline connectBy = twoThirds(deadline);
        if (heartbeat > 0 && d.members[static_cast<size_t>(me)].former >= 0) {
          std::vector<std::string> newcomers;
          for (int r = 0; r < size; ++r) {
            if (d.members[static_cast<size_t>(r)].former < 0) {
              newcomers.push_back("addr/" + std::to_string(r));
            }
          }
          if (!newcomers.empty()) watched->wait(newcomers, left(connectBy));
        }
        impl = connectScopedBy(watched, route, me, size, options, connectBy);
        root->set(at + "connected/" + std::to_string(me), bytes("1"));
      } catch (const Error& e) {
        lastFailure = "attempt " + std::to_string(attempt) + " failed (" + e.what() + ")";
      }
      // Some members may have connected and others not: one elected member says for all whether
      // the attempt stands (every member connected) or is abandoned.
      const bool all = impl && everyoneConnected(*root, at, size, halfway(deadline));
      if (cas != nullptr) {
        if (!has(*root, at + "outcome")) {
          cas->compareSet(at + "outcome", std::nullopt, bytes(all ? "commit" : "abandon"));
        }
      } else if (!has(*root, at + "outcome") && root->add(at + "elect", 1) == 1) {
        root->set(at + "outcome", bytes(all ? "commit" : "abandon"));
      }
      std::string outcome;
      try {
        outcome = text(root->get(at + "outcome", left(deadline)));
      } catch (const Error& e) {
        throw Error(e.code(),
                    "no outcome of connecting as rank " + std::to_string(me) + " of " +
                        std::to_string(size) + " (generation " + std::to_string(generation) +
                        ", attempt " + std::to_string(attempt) + ")" +
                        (lastFailure.empty() ? "" : " after " + lastFailure) + ": " + e.what());
      }
      if (outcome == "commit") {
        if (!impl) throw Error(ErrorCode::kInternal, "attempt committed without this member");
        return Outcome{std::move(impl), d.members};
      }
      if (lastFailure.empty()) {
        lastFailure =
            "attempt " + std::to_string(attempt) + " abandoned (a member did not connect)";
      }
    }
    if (deadline.expired()) {
      throw Error(ErrorCode::kTimeout, "no membership of generation " + std::to_string(generation) +
                                           " in time: " + lastFailure);
    }
    // A member was lost while connecting: the members of this attempt try again.
    base = d.members;
    slot = me;
    knownDead.clear();
  }
}

}  // namespace

Outcome agree(const std::shared_ptr<Store>& root, uint64_t generation, int oldSize,
              const Participant& self, const std::vector<int>& knownDead, const Options& options,
              const std::string& route, const Deadline& deadline,
              const std::function<std::vector<int>()>& silent) {
  std::vector<Member> base(static_cast<size_t>(oldSize));
  for (int r = 0; r < oldSize; ++r) base[static_cast<size_t>(r)].former = r;
  return runAttempts(root, generation, 0, std::move(base), self.rank, 0, knownDead, options, route,
                     deadline, silent);
}

int64_t enqueueJoiner(Store& root) {
  const int64_t ticket = root.add(kTicketsKey, 1);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  root.set(joinerKey(ticket), bytes(std::string(host) + " pid " + std::to_string(getpid())));
  return ticket;
}

std::pair<uint64_t, int> awaitAdmission(Store& root, int64_t ticket, const Deadline& deadline) {
  Store::Bytes v;
  for (;;) {
    // Consumed without an admission: a decision passed this newcomer over (its sign of life was
    // stale when the running ranks decided). Decisions write admissions before they consume.
    if (root.add(kConsumedKey, 0) >= ticket && !has(root, admittedKey(ticket)) &&
        !has(root, withdrawnKey(ticket))) {
      throw Error(ErrorCode::kPeerFailure,
                  "newcomer ticket " + std::to_string(ticket) +
                      " was passed over by a membership change: the running ranks found its "
                      "heartbeat (joiner_seen) older than the heartbeat timeout");
    }
    try {
      v = root.get(admittedKey(ticket), std::chrono::milliseconds(deadline.remainingMs(1000)));
      break;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kTimeout) throw;
      if (!deadline.expired()) continue;
      root.set(withdrawnKey(ticket), bytes("timed out"));
      // Admitted meanwhile after all: go on.
      if (!has(root, admittedKey(ticket))) {
        throw Error(ErrorCode::kTimeout,
                    "no membership change admitted newcomer ticket " + std::to_string(ticket) +
                        " in time (do the ranks of the job call shrink()?): " + e.what());
      }
      v = root.get(admittedKey(ticket), std::chrono::seconds(5));
      break;
    }
  }
  std::istringstream in(text(v));
  uint64_t generation = 0;
  int attempt = 0;
  in >> generation >> attempt;
  return {generation, attempt};
}

Outcome agreeAsNewcomer(const std::shared_ptr<Store>& root, uint64_t generation, int attempt,
                        int64_t ticket, const Options& options, const std::string& route,
                        const Deadline& deadline) {
  return runAttempts(root, generation, attempt, {}, -1, ticket, {}, options, route, deadline);
}

int joinersWaiting(Store& root, double heartbeatSeconds, int size) {
  const int64_t consumed = root.add(kConsumedKey, 0);
  const int64_t issued = root.add(kTicketsKey, 0);
  const int64_t room = size < 0 ? std::numeric_limits<int64_t>::max() : maxSize(root) - size;
  int waiting = 0;
  // As propose() counts them: a ticket whose record is not written yet (enqueueJoiner adds, then
  // sets) is not admitted by a decision now, so it is not waiting yet either.
  for (int64_t t = consumed + 1; t <= issued && waiting < room && has(root, joinerKey(t)); ++t) {
    waiting += !has(root, withdrawnKey(t)) && joinerAlive(root, t, heartbeatSeconds);
  }
  return waiting;
}

void setAfterRegisterHookForTesting(std::function<void(int rank)> hook) {
  std::lock_guard<std::mutex> lock(hookMu);
  afterRegisterHook = std::move(hook);
}

}  // namespace chorus::membership
