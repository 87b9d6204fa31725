#include "hang.h"

#include <algorithm>
#include <map>
#include <set>

#include "finding.h"

namespace chorus::doctor {
namespace {

const RankAtCall* at(const HangPicture& p, int rank) {
  for (const auto& r : p.ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

// Follows "waits for" from rank until a rank that is not waiting (the one that holds things
// up), or a rank seen before (a cycle: returns -1).
int rootOf(const HangPicture& p, int rank) {
  std::set<int> seen;
  int current = rank;
  while (true) {
    if (!seen.insert(current).second) return -1;
    const RankAtCall* r = at(p, current);
    if (r == nullptr || r->state != RankState::kWaiting || r->waitsFor.empty()) return current;
    current = r->waitsFor.front();
  }
}

std::string stateName(RankState s) {
  switch (s) {
    case RankState::kNotEntered:
      return "not_entered";
    case RankState::kQueued:
      return "queued";
    case RankState::kWaiting:
      return "waiting";
    case RankState::kBusy:
      return "busy";
    case RankState::kCompleted:
      return "completed";
    case RankState::kUnknown:
      return "unknown";
  }
  return "unknown";
}

// How the rank that ends a chain of waits stands, for "..., which waits for rank 2, <this>".
std::string chainEnd(const HangPicture& p, int rank) {
  const RankAtCall* r = at(p, rank);
  if (r == nullptr || r->state == RankState::kUnknown) return "of which nothing is known";
  switch (r->state) {
    case RankState::kBusy:
      return "which is running it and waits for no one";
    case RankState::kQueued:
      return "which has it queued but not started";
    case RankState::kCompleted:
      return "which has completed it";
    case RankState::kNotEntered:
      return p.live ? "which has not issued it" : "which never entered it";
    default:
      return "";
  }
}

// Live: ranks that wait in the call by their last record, but stopped publishing while others
// did not. Their wait is out of date: a rank cut off from its peers and the store (or frozen)
// keeps saying it waits for its own peer, and following that wait round a ring of waiting ranks
// would blame whichever rank closes the cycle, or a peer that has completed the call.
std::vector<int> staleWaiters(const HangPicture& p) {
  std::vector<int> out;
  size_t stale = 0;
  for (const auto& r : p.ranks) {
    if (!r.stale) continue;
    ++stale;
    if (r.state == RankState::kWaiting && !r.waitsFor.empty()) out.push_back(r.rank);
  }
  if (stale == p.ranks.size()) out.clear();  // all out of date alike: nothing to tell them apart
  return out;
}

std::string staleVerdict(const HangPicture& p, const std::vector<int>& stale) {
  std::string verdict = "all ranks are in " + p.call;
  for (const auto& r : p.ranks) {
    if (std::find(stale.begin(), stale.end(), r.rank) == stale.end() || r.waitsFor.empty()) {
      continue;
    }
    verdict += "; rank " + std::to_string(r.rank) + " waits for rank " +
               std::to_string(r.waitsFor.front()) + " by its last record, which is out of date";
  }
  std::vector<int> waiters;
  for (const auto& r : p.ranks) {
    if (r.state == RankState::kWaiting && !r.stale && !r.waitsFor.empty() &&
        std::find(stale.begin(), stale.end(), r.waitsFor.front()) != stale.end()) {
      waiters.push_back(r.rank);
    }
  }
  if (!waiters.empty()) {
    verdict += "; " + rankList(waiters) + (waiters.size() == 1 ? " waits" : " wait") + " for " +
               rankList(stale);
  }
  return verdict;
}

}  // namespace

HangVerdict describeHang(const HangPicture& p) {
  HangVerdict v;
  std::vector<int> notEntered, queued, waiting;
  for (const auto& r : p.ranks) {
    if (r.state == RankState::kNotEntered) notEntered.push_back(r.rank);
    if (r.state == RankState::kQueued) queued.push_back(r.rank);
    if (r.state == RankState::kWaiting) waiting.push_back(r.rank);
  }
  // The roots of the waiting chains, in rank order.
  std::set<int> roots;
  bool cycle = false;
  for (int w : waiting) {
    int root = rootOf(p, w);
    if (root < 0) {
      cycle = true;
    } else {
      roots.insert(root);
    }
  }
  // Causes: ranks that never got into the call, plus ranks without a dump that others wait for.
  std::vector<std::string> parts;
  if (!notEntered.empty()) {
    std::string verb;
    if (p.live) {
      double quiet = 0;
      for (const auto& r : p.ranks) {
        if (r.state == RankState::kNotEntered) quiet = std::max(quiet, r.quietSeconds);
      }
      verb = std::string(notEntered.size() == 1 ? " has" : " have") + " not issued " + p.call;
      if (quiet >= 0) verb += " for " + seconds(quiet);
    } else {
      verb = " never entered " + p.call;
    }
    parts.push_back(rankList(notEntered) + verb);
    v.culprits = notEntered;
  }
  if (!queued.empty()) {
    parts.push_back(rankList(queued) + (queued.size() == 1 ? " has " : " have ") + p.call +
                    " queued but never started it");
    v.culprits.insert(v.culprits.end(), queued.begin(), queued.end());
  }
  std::vector<int> silentRoots, unheard, heard, untold;
  for (const auto& r : p.ranks) {
    if (r.state != RankState::kUnknown || !roots.count(r.rank)) continue;
    silentRoots.push_back(r.rank);
    (r.peersHeardFromIt ? heard : r.heardKnown ? unheard : untold).push_back(r.rank);
  }
  if (!silentRoots.empty()) {
    const char* nothing = p.live ? " published no progress record" : " left no dump";
    if (!unheard.empty()) {
      parts.push_back(rankList(unheard) + nothing +
                      (p.live ? "" : " and its peers heard nothing from it in " + p.call));
    }
    if (!heard.empty()) parts.push_back(rankList(heard) + nothing + " after it entered " + p.call);
    // Whether it sent anything in the call is unknown (a peer did not follow the call's
    // traffic, trace-format.md "Detail"); that its peers wait for it is known (a root).
    if (!untold.empty()) {
      parts.push_back(rankList(untold) + nothing + " and its peers wait for it in " + p.call);
    }
    v.culprits.insert(v.culprits.end(), silentRoots.begin(), silentRoots.end());
  }
  if (!parts.empty()) {
    std::string verdict;
    for (const auto& part : parts) verdict += (verdict.empty() ? "" : "; ") + part;
    if (!waiting.empty()) {
      verdict += "; " + rankList(waiting) + (waiting.size() == 1 ? " waits" : " wait") +
                 " in it for " + rankList(std::vector<int>(roots.begin(), roots.end()));
    }
    v.verdict = verdict;
  } else if (waiting.empty()) {
    v.verdict = "all ranks are in " + p.call + " and none waits for a peer";
    // Live: a rank that stopped publishing in there, while others did not, is the suspect (a
    // rank blocked sending to a peer that is cut off is running, not waiting).
    std::vector<int> stale;
    for (const auto& r : p.ranks) {
      if (r.stale) stale.push_back(r.rank);
    }
    if (stale.size() < p.ranks.size()) v.culprits = stale;
  } else if (auto staleWaits = staleWaiters(p); !staleWaits.empty()) {
    v.verdict = staleVerdict(p, staleWaits);
    v.culprits = staleWaits;
  } else {
    // Everyone is in the call: name the rank most others wait for, and follow its own wait.
    std::map<int, std::vector<int>> waitersOf;
    for (const auto& r : p.ranks) {
      if (r.state == RankState::kWaiting && !r.waitsFor.empty())
        waitersOf[r.waitsFor.front()].push_back(r.rank);
    }
    auto most = std::max_element(
        waitersOf.begin(), waitersOf.end(),
        [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    std::string verdict = "all ranks are in " + p.call + "; " + rankList(most->second) +
                          (most->second.size() == 1 ? " waits" : " wait") + " for rank " +
                          std::to_string(most->first);
    std::set<int> seen(most->second.begin(), most->second.end());
    int current = most->first;
    seen.insert(current);
    while (true) {
      const RankAtCall* r = at(p, current);
      if (r == nullptr || r->state != RankState::kWaiting || r->waitsFor.empty()) {
        verdict += ", " + chainEnd(p, current);
        v.culprits.push_back(current);
        break;
      }
      int next = r->waitsFor.front();
      verdict += ", which waits for rank " + std::to_string(next);
      if (!seen.insert(next).second) {
        verdict += " (a cycle)";
        v.culprits.push_back(next);
        break;
      }
      current = next;
    }
    v.verdict = verdict;
  }
  if (cycle && v.verdict.find("cycle") == std::string::npos)
    v.verdict += " (some waits form a cycle)";

  v.details = {{"call", p.call}, {"number", p.number}, {"culprits", v.culprits}};
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : p.ranks) {
    nlohmann::json j = {{"rank", r.rank}, {"state", stateName(r.state)}};
    if (!r.waitsFor.empty()) j["waits_for"] = r.waitsFor;
    if (r.quietSeconds >= 0) j["quiet_seconds"] = r.quietSeconds;
    ranks.push_back(j);
  }
  v.details["ranks"] = ranks;
  return v;
}

}  // namespace chorus::doctor
