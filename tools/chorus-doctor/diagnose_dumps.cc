// Verdicts from dumps: a mismatch first (it explains everything after it), then a lost rank,
// then the first call not every rank finished, else nothing wrong.
#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "diagnose.h"
#include "hang.h"

namespace chorus::doctor {
namespace {

using Group = std::vector<const Dump*>;

const Dump* dumpOf(const Group& g, int rank) {
  for (const Dump* d : g) {
    if (d->rank == rank) return d;
  }
  return nullptr;
}

// Counts differ legitimately between ranks in the "_v" collectives.
std::string comparedSignature(const Entry& e) {
  if (e.collective.ends_with("_v")) {
    Entry copy = e;
    copy.count = 0;
    std::string s = copy.signature();
    return s;
  }
  return e.signature();
}

std::string describeEntry(const Entry& e, int64_t dumpedUs) {
  std::string s = e.name() + " (" + (e.algorithm.empty() ? "no algorithm yet" : e.algorithm) +
                  ", " + std::to_string(e.bytes) + " bytes): " + e.state;
  if (e.waitingOn >= 0) s += " on rank " + std::to_string(e.waitingOn);
  int64_t since = e.startedUs ? e.startedUs : e.issuedUs;
  if (!e.done() && e.state != "failed" && since > 0 && dumpedUs > since + 50000) {
    s += " for " + seconds(static_cast<double>(dumpedUs - since) / 1e6) + " before the dump";
  }
  return s;
}

std::vector<std::string> rankEvidence(const Group& g) {
  std::vector<std::string> lines;
  for (const Dump* d : g) {
    std::string s = "rank " + std::to_string(d->rank) + " (" + d->host + ", pid " +
                    std::to_string(d->pid) + ", dumped on " + d->reason + "): ";
    const Entry* last = d->lastCollective();
    s += last ? "last call " + describeEntry(*last, d->dumpedUs) : "no collective recorded";
    lines.push_back(s);
    if (d->error) lines.push_back("  error: " + *d->error);
  }
  return lines;
}

std::optional<Finding> findMismatch(const Group& g, Finding f) {
  std::set<int64_t> numbers;
  for (const Dump* d : g) {
    for (const auto& e : d->entries) {
      if (e.collective != "send_recv") numbers.insert(e.number);
    }
  }
  for (int64_t n : numbers) {
    // Signature -> ranks calling it, in the order the ranks come.
    std::vector<std::pair<std::string, std::vector<int>>> calls;
    std::map<std::string, std::string> shown;
    for (const Dump* d : g) {
      const Entry* e = d->collective(n);
      if (!e) continue;
      std::string key = comparedSignature(*e);
      shown.emplace(key, e->signature());
      auto it = std::find_if(calls.begin(), calls.end(), [&](auto& c) { return c.first == key; });
      if (it == calls.end()) {
        calls.push_back({key, {d->rank}});
      } else {
        it->second.push_back(d->rank);
      }
    }
    if (calls.size() < 2) continue;
    std::string verdict = "ranks disagree at #" + std::to_string(n) + ": ";
    nlohmann::json details = {{"number", n}, {"calls", nlohmann::json::array()}};
    for (size_t i = 0; i < calls.size(); ++i) {
      const auto& [key, ranks] = calls[i];
      verdict += (i ? ", " : "") + rankList(ranks) + (ranks.size() == 1 ? " calls " : " call ") +
                 shown[key];
      details["calls"].push_back({{"ranks", ranks}, {"call", shown[key]}});
    }
    f.kind = "mismatch";
    f.verdict = verdict;
    f.details = details;
    return f;
  }
  return std::nullopt;
}

// Ranks a failure message says the connection to was lost (or that closed their end early).
std::set<int> lostRanksNamedIn(const std::string& error) {
  static const std::regex kLost(
      R"(lost connection to rank (\d+)|rank (\d+) \([^)]*\) closed its communicator)");
  std::set<int> ranks;
  for (std::sregex_iterator it(error.begin(), error.end(), kLost), end; it != end; ++it) {
    const auto& m = *it;
    ranks.insert(std::stoi(m[1].matched ? m[1].str() : m[2].str()));
  }
  return ranks;
}

// Collectives whose result on any rank depends on every rank's data: one that finished on a
// rank had every rank's part.
bool needsEveryRank(const std::string& collective) {
  static const std::set<std::string> kAll = {"allreduce",  "all_gather",   "reduce_scatter",
                                             "barrier",    "all_gather_v", "reduce_scatter_v",
                                             "all_to_all", "all_to_all_v"};
  return kAll.count(collective) > 0;
}

std::optional<Finding> findLostRank(const Group& g, Finding f) {
  // A rank counts as lost when it left no dump and a peer lost its connection to it.
  std::map<int, std::vector<int>> reporters;
  for (const Dump* d : g) {
    if (!d->error) continue;
    for (int r : lostRanksNamedIn(*d->error)) {
      if (!dumpOf(g, r)) reporters[r].push_back(d->rank);
    }
  }
  if (reporters.empty()) return std::nullopt;
  std::vector<std::string> parts;
  nlohmann::json lost = nlohmann::json::array();
  for (const auto& [rank, by] : reporters) {
    // The last call every peer that exchanged with it finished, having heard from it.
    std::set<int64_t> numbers;
    for (const Dump* d : g) {
      for (const auto& e : d->entries) numbers.insert(e.number);
    }
    std::optional<int64_t> lastCompleted;
    std::string lastName;
    std::optional<std::string> enteredAfter;
    for (int64_t n : numbers) {
      bool heard = false, allDone = true, involved = false;
      std::string name;
      for (const Dump* d : g) {
        const Entry* e = d->collective(n);
        if (!e) continue;
        if (!e->detailed) {
          // Traffic not followed: a finished call that needs every rank's data had its part.
          if (e->done() && needsEveryRank(e->collective)) {
            involved = heard = true;
            name = e->name();
          }
          continue;
        }
        const PeerIo* p = e->peer(rank);
        if (!p) continue;
        involved = true;
        name = e->name();
        heard = heard || p->received > 0 || p->firstArrivalUs > 0;
        allDone = allDone && e->done();
      }
      if (!involved || !heard) continue;
      if (allDone) {
        lastCompleted = n;
        lastName = name;
      } else if (!enteredAfter) {
        enteredAfter = name;
      }
    }
    std::string part = "rank " + std::to_string(rank) + " was lost";
    if (lastCompleted) {
      part += " after completing " + lastName;
    } else {
      part += " before completing any recorded call";
    }
    if (enteredAfter && (!lastCompleted || *enteredAfter != lastName)) {
      part += ", inside " + *enteredAfter;
    }
    part += " (" + rankList(by) + (by.size() == 1 ? " reports" : " report") + " it)";
    parts.push_back(part);
    nlohmann::json j = {{"rank", rank}, {"reported_by", by}};
    j["last_completed"] = lastCompleted ? nlohmann::json(lastName) : nlohmann::json(nullptr);
    j["entered"] = enteredAfter ? nlohmann::json(*enteredAfter) : nlohmann::json(nullptr);
    lost.push_back(j);
  }
  f.kind = "lost_rank";
  f.verdict.clear();
  for (const auto& p : parts) f.verdict += (f.verdict.empty() ? "" : "; ") + p;
  f.details = {{"lost", lost}};
  return f;
}

// The first collective at or after which some rank has not finished, and the rank's next call
// when everything it recorded is done.
int64_t firstUnfinished(const Dump& d) {
  const Entry* last = nullptr;
  for (const auto& e : d.entries) {
    if (e.collective == "send_recv") continue;
    if (!e.done()) return e.number;
    last = &e;
  }
  return last ? last->number + 1 : 0;
}

// Whom a rank stuck in e waits for: the recorded peer, else the one its own timeout names,
// else the peers nothing arrived from.
std::vector<int> waitsFor(const Dump& d, const Entry& e) {
  if (e.waitingOn >= 0) return {e.waitingOn};
  if (d.error) {
    static const std::regex kItself(R"(this rank was itself waiting for rank (\d+))");
    static const std::regex kTimedOut(R"(timed out waiting for rank (\d+))");
    std::smatch m;
    const std::string& text = *d.error;
    // A failure relayed from a peer still says whom this rank was waiting for.
    if (std::regex_search(text, m, kItself)) return {std::stoi(m[1].str())};
    // Only its own timeout, not one relayed from a peer ("rank 1 failed: timed out ...").
    if (std::regex_search(text, m, kTimedOut) &&
        text.substr(0, static_cast<size_t>(m.position(0))).find("failed:") == std::string::npos) {
      return {std::stoi(m[1].str())};
    }
  }
  std::vector<int> silent;
  for (const auto& p : e.peers) {
    if (p.firstArrivalUs == 0 && p.received == 0) silent.push_back(p.rank);
  }
  return silent;
}

std::optional<Finding> findHang(const Group& g, Finding f) {
  int64_t first = INT64_MAX;
  for (const Dump* d : g) first = std::min(first, firstUnfinished(*d));
  HangPicture p;
  p.number = first;
  const Entry* named = nullptr;
  for (const Dump* d : g) {
    if ((named = d->collective(first))) break;
  }
  if (!named) return std::nullopt;  // every rank finished all it recorded, none started more
  p.call = named->name();
  for (int rank = 0; rank < f.size; ++rank) {
    RankAtCall r;
    r.rank = rank;
    const Dump* d = dumpOf(g, rank);
    if (!d) {
      for (const Dump* other : g) {
        const Entry* e = other->collective(first);
        if (e && !e->detailed) r.heardKnown = false;
        const PeerIo* io = e ? e->peer(rank) : nullptr;
        if (io && (io->firstArrivalUs > 0 || io->received > 0)) r.peersHeardFromIt = true;
      }
      if (r.peersHeardFromIt) r.heardKnown = true;
      p.ranks.push_back(r);
      continue;
    }
    const Entry* e = d->collective(first);
    if (!e) {
      r.state = RankState::kNotEntered;
    } else if (e->done()) {
      r.state = RankState::kCompleted;
    } else if (e->state == "queued") {
      r.state = RankState::kQueued;
    } else {
      r.waitsFor = waitsFor(*d, *e);
      r.state = r.waitsFor.empty() ? RankState::kBusy : RankState::kWaiting;
    }
    p.ranks.push_back(r);
  }
  HangVerdict v = describeHang(p);
  f.kind = "hang";
  f.verdict = v.verdict;
  f.details = v.details;
  return f;
}

Finding diagnoseGroup(const Group& g) {
  Finding f;
  f.communicator = g.front()->communicator;
  for (const Dump* d : g) {
    f.size = std::max({f.size, d->size, d->rank + 1});
    f.ranksSeen.push_back(d->rank);
  }
  for (int r = 0; r < f.size; ++r) {
    if (!dumpOf(g, r)) f.ranksMissing.push_back(r);
  }
  f.evidence = rankEvidence(g);
  for (const Dump* d : g) {
    if (d->recorded > static_cast<int64_t>(d->entries.size())) {
      f.evidence.push_back("rank " + std::to_string(d->rank) + " recorded " +
                           std::to_string(d->recorded) + " calls; the oldest " +
                           std::to_string(d->recorded - static_cast<int64_t>(d->entries.size())) +
                           " are no longer in its dump");
    }
  }
  if (!f.ranksMissing.empty()) {
    f.evidence.push_back("no dump from " + rankList(f.ranksMissing) + " (" +
                         std::to_string(f.ranksSeen.size()) + " of " + std::to_string(f.size) +
                         " ranks dumped)");
  }
  if (auto m = findMismatch(g, f)) return *m;
  if (auto l = findLostRank(g, f)) return *l;
  if (auto h = findHang(g, f)) {
    if (!f.ranksMissing.empty() && h->verdict.find("no dump") == std::string::npos) {
      h->verdict += " (no dump from " + rankList(f.ranksMissing) + ")";
    }
    return *h;
  }
  for (const Dump* d : g) {
    if (d->error) {
      f.kind = "failure";
      f.verdict = "rank " + std::to_string(d->rank) + " failed with no call pending: " + *d->error;
      return f;
    }
  }
  // Healthy: name the last call every rank finished.
  int64_t lastCommon = INT64_MAX;
  const Entry* lastEntry = nullptr;
  for (const Dump* d : g) {
    const Entry* e = d->lastCollective();
    if (!e) {
      lastCommon = -1;
      break;
    }
    if (e->number < lastCommon) {
      lastCommon = e->number;
      lastEntry = e;
    }
  }
  f.kind = "healthy";
  f.verdict = "no problem found (" + std::to_string(f.size) + " ranks, " +
              (lastEntry && lastCommon >= 0 ? "last completed " + lastEntry->name()
                                            : std::string("no collective recorded")) +
              ")";
  if (!f.ranksMissing.empty()) f.verdict += "; no dump from " + rankList(f.ranksMissing);
  return f;
}

}  // namespace

std::vector<Finding> diagnoseDumps(const std::vector<Dump>& dumps) {
  std::map<std::string, Group> groups;
  for (const auto& d : dumps) groups[d.communicator].push_back(&d);
  std::vector<Finding> findings;
  for (auto& [id, g] : groups) {
    std::sort(g.begin(), g.end(), [](const Dump* a, const Dump* b) { return a->rank < b->rank; });
    findings.push_back(diagnoseGroup(g));
  }
  return findings;
}

}  // namespace chorus::doctor
