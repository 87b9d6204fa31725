// Verdicts from the progress records a running job publishes: the lowest call not every rank
// completed, who has not issued it, and who waits in it for whom.
#include <algorithm>
#include <map>
#include <set>

#include "diagnose.h"
#include "hang.h"

namespace chorus::doctor {
namespace {

using Communicator = LiveRecords::Communicator;

std::string text(const Store::Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

double secondsBetween(int64_t fromUs, int64_t toUs) {
  return fromUs > 0 ? static_cast<double>(toUs - fromUs) / 1e6 : -1;
}

const Progress* recordOf(const Communicator& c, int rank) {
  for (const auto& p : c.records) {
    if (p.rank == rank) return &p;
  }
  return nullptr;
}

std::string describe(const Progress& p, int64_t now, bool stale) {
  std::string s = "rank " + std::to_string(p.rank) + " (" + p.host + ", pid " +
                  std::to_string(p.pid) + "): issued " + std::to_string(p.issued) + ", completed " +
                  std::to_string(p.completed) + ", " + p.state;
  if (p.hasCurrent) {
    s += " in " + p.currentCollective + " #" + std::to_string(p.currentNumber);
    if (p.currentWaitingOn >= 0) s += " on rank " + std::to_string(p.currentWaitingOn);
    if (p.currentSinceUs > 0) s += " for " + seconds(secondsBetween(p.currentSinceUs, now));
  }
  if (p.lastProgressUs > 0)
    s += "; last progress " + seconds(secondsBetween(p.lastProgressUs, now)) + " ago";
  s += "; published " + seconds(secondsBetween(p.publishedUs, now)) + " ago";
  if (stale) s += " (stale: it stopped publishing)";
  return s;
}

Finding diagnoseCommunicator(const Communicator& c, int64_t now, const LiveOptions& options) {
  Finding f;
  f.communicator = c.id;
  f.size = c.size;
  std::vector<int> stale;
  for (const auto& p : c.records) {
    f.size = std::max({f.size, p.size, p.rank + 1});
    f.ranksSeen.push_back(p.rank);
    bool isStale = secondsBetween(p.publishedUs, now) > options.staleSeconds;
    if (isStale) stale.push_back(p.rank);
    f.evidence.push_back(describe(p, now, isStale));
  }
  for (int r = 0; r < f.size; ++r) {
    if (!recordOf(c, r)) f.ranksMissing.push_back(r);
  }
  if (!f.ranksMissing.empty()) {
    f.evidence.push_back("no progress record from " + rankList(f.ranksMissing));
  }
  if (c.records.empty()) {
    f.kind = "hang";
    f.verdict = "no rank of the communicator published a progress record";
    return f;
  }

  int64_t first = INT64_MAX, latestProgress = 0;
  bool pending = false;
  for (const auto& p : c.records) {
    first = std::min(first, p.completed);
    latestProgress = std::max(latestProgress, p.lastProgressUs);
    pending = pending || p.issued > p.completed;
  }
  for (const auto& p : c.records) pending = pending || p.completed != first;
  const double quiet = secondsBetween(latestProgress, now);
  f.details = {{"completed", first}, {"quiet_seconds", quiet}, {"stale", stale}};

  if (!pending || (quiet >= 0 && quiet < options.quietSeconds && stale.empty())) {
    f.kind = "healthy";
    f.verdict = "no problem found (" + std::to_string(f.size) + " ranks, " + std::to_string(first) +
                " collectives completed" +
                (pending ? ", last progress " + seconds(quiet) + " ago" : ", all idle") + ")";
    if (!stale.empty()) {
      f.verdict += "; " + rankList(stale) + " stopped publishing (the job may have ended)";
    }
    if (!f.ranksMissing.empty()) f.verdict += "; no record from " + rankList(f.ranksMissing);
    return f;
  }

  HangPicture picture;
  picture.live = true;
  picture.number = first;
  picture.call = "collective #" + std::to_string(first);
  for (const auto& p : c.records) {
    if (p.hasCurrent && p.currentNumber == first && !p.currentCollective.empty()) {
      picture.call = p.currentCollective + " #" + std::to_string(first);
    }
  }
  for (int rank = 0; rank < f.size; ++rank) {
    RankAtCall r;
    r.rank = rank;
    if (const Progress* p = recordOf(c, rank)) {
      r.quietSeconds = secondsBetween(p->lastProgressUs, now);
      r.stale = std::find(stale.begin(), stale.end(), rank) != stale.end();
      if (p->issued <= first) {
        r.state = RankState::kNotEntered;
      } else if (p->completed > first) {
        r.state = RankState::kCompleted;
      } else if (p->state == "queued") {
        r.state = RankState::kQueued;
      } else if (p->hasCurrent && p->currentWaitingOn >= 0) {
        r.state = RankState::kWaiting;
        r.waitsFor = {p->currentWaitingOn};
      } else {
        r.state = RankState::kBusy;
      }
    }
    picture.ranks.push_back(r);
  }
  HangVerdict v = describeHang(picture);
  f.kind = "hang";
  f.verdict = v.verdict;
  std::vector<int> staleOthers;
  for (int r : stale) {
    if (std::find(v.culprits.begin(), v.culprits.end(), r) == v.culprits.end()) {
      staleOthers.push_back(r);
    }
  }
  for (const auto& p : c.records) {
    const bool isStale = std::find(stale.begin(), stale.end(), p.rank) != stale.end();
    if (isStale && std::find(v.culprits.begin(), v.culprits.end(), p.rank) != v.culprits.end()) {
      f.verdict += "; rank " + std::to_string(p.rank) + " stopped publishing " +
                   seconds(secondsBetween(p.publishedUs, now)) + " ago";
    }
  }
  if (!staleOthers.empty()) {
    f.verdict += "; " + rankList(staleOthers) + " also stopped publishing" +
                 (staleOthers.size() == 1 ? " (a suspect: its record may be out of date)"
                                          : " (suspects: their records may be out of date)");
  }
  if (quiet >= 0) f.verdict += " (no progress for " + seconds(quiet) + ")";
  v.details["completed"] = first;
  v.details["quiet_seconds"] = quiet;
  v.details["stale"] = stale;
  f.details = v.details;
  return f;
}

}  // namespace

LiveRecords readProgress(Store& store, std::chrono::milliseconds timeout) {
  LiveRecords result;
  const int64_t count = store.add("chorus/progress/count", 0);
  std::set<std::string> seen;
  for (int64_t n = 1; n <= count; ++n) {
    const std::string key = "chorus/progress/comm/" + std::to_string(n);
    try {
      if (!store.check({key})) continue;  // counted, not yet written
      auto j = nlohmann::json::parse(text(store.get(key, timeout)));
      Communicator c;
      c.id = j.at("communicator").get<std::string>();
      c.size = j.at("size").get<int>();
      if (!seen.insert(c.id).second) continue;
      for (int rank = 0; rank < c.size; ++rank) {
        const std::string recordKey = "chorus/progress/" + c.id + "/" + std::to_string(rank);
        if (!store.check({recordKey})) continue;
        try {
          c.records.push_back(parseProgress(text(store.get(recordKey, timeout))));
        } catch (const std::runtime_error& e) {
          result.problems.push_back(recordKey + ": " + e.what());
        }
      }
      result.communicators.push_back(std::move(c));
    } catch (const nlohmann::json::exception& e) {
      result.problems.push_back(key + ": " + e.what());
    }
  }
  return result;
}

std::vector<Finding> diagnoseLive(const LiveRecords& records, int64_t now,
                                  const LiveOptions& options) {
  std::vector<Finding> findings;
  const auto& comms = records.communicators;
  // The records of a communicator replaced at a membership change (shrink) or destroyed stay in
  // the store and go stale: when every rank of one stopped publishing while a communicator
  // registered after it is live, it has ended; it is no hang of the job.
  auto allStale = [&](const LiveRecords::Communicator& c) {
    return std::all_of(c.records.begin(), c.records.end(), [&](const Progress& p) {
      return secondsBetween(p.publishedUs, now) > options.staleSeconds;
    });
  };
  for (size_t i = 0; i < comms.size(); ++i) {
    const auto& c = comms[i];
    Finding f = diagnoseCommunicator(c, now, options);
    const bool later = std::any_of(comms.begin() + static_cast<std::ptrdiff_t>(i) + 1, comms.end(),
                                   [&](const auto& d) { return !allStale(d); });
    if (f.kind != "healthy" && !c.records.empty() && allStale(c) && later) {
      int64_t last = 0;
      for (const auto& p : c.records) last = std::max(last, p.publishedUs);
      f.kind = "healthy";
      f.verdict = "ended: no rank has published for " + seconds(secondsBetween(last, now)) +
                  ", and a communicator registered after it is live (replaced at a membership "
                  "change, or destroyed)";
    }
    findings.push_back(std::move(f));
  }
  return findings;
}

}  // namespace chorus::doctor
