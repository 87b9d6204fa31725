#include "timeline.h"

#include <algorithm>
#include <map>

namespace chorus::doctor {
namespace {

using nlohmann::json;

json slice(const std::string& name, const char* category, int pid, int tid, int64_t fromUs,
           int64_t toUs, int64_t originUs, json args) {
  return {{"name", name},
          {"cat", category},
          {"ph", "X"},
          {"pid", pid},
          {"tid", tid},
          {"ts", fromUs - originUs},
          {"dur", std::max<int64_t>(toUs - fromUs, 0)},
          {"args", std::move(args)}};
}

json metadata(const char* what, int pid, int tid, json args) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

void addCalls(json& events, const Dump& d, int pid, int64_t origin) {
  for (const auto& e : d.entries) {
    const int64_t start = e.startedUs ? e.startedUs : e.issuedUs;
    if (start == 0) continue;
    const int64_t end = e.endedUs ? e.endedUs : std::max(d.dumpedUs, start);
    if (e.startedUs && e.issuedUs && e.startedUs > e.issuedUs) {
      events.push_back(slice("queued: " + e.name(), "queued", pid, d.rank, e.issuedUs, e.startedUs,
                             origin, json::object()));
    }
    json args = {{"algorithm", e.algorithm},
                 {"bytes", e.bytes},
                 {"state", e.state},
                 {"dtype", e.dtype},
                 {"count", e.count}};
    if (!e.op.empty()) args["op"] = e.op;
    if (e.root >= 0) args["root"] = e.root;
    if (e.waitingOn >= 0) args["waiting_on"] = e.waitingOn;
    events.push_back(slice(e.name(), "call", pid, d.rank, start, end, origin, args));
    if (!e.startedUs || e.peers.empty()) continue;
    // The wait for the last peer: from the start to the last first arrival (to the end when
    // some peer never arrived).
    const PeerIo* last = nullptr;
    bool someoneMissing = false;
    for (const auto& p : e.peers) {
      if (p.firstArrivalUs == 0 && p.received == 0) {
        someoneMissing = true;
        if (!last || last->firstArrivalUs != 0) last = &p;
      } else if (!someoneMissing && (!last || p.firstArrivalUs > last->firstArrivalUs)) {
        last = &p;
      }
    }
    // A peer this call only sends to never "arrives": only a call not done waits on it.
    if (someoneMissing && e.done()) {
      last = nullptr;
      for (const auto& p : e.peers) {
        if (p.firstArrivalUs && (!last || p.firstArrivalUs > last->firstArrivalUs)) last = &p;
      }
    }
    // The recorder knows whom a blocked call waits for better than the arrivals do.
    if (const PeerIo* blocking = e.waitingOn >= 0 ? e.peer(e.waitingOn) : nullptr) last = blocking;
    if (!last) continue;
    int64_t waitEnd = last->firstArrivalUs ? last->firstArrivalUs : end;
    if (waitEnd <= e.startedUs) continue;
    events.push_back(slice("wait for rank " + std::to_string(last->rank), "wait", pid, d.rank,
                           e.startedUs, std::min(waitEnd, end), origin,
                           {{"peer", last->rank}, {"arrived", last->firstArrivalUs != 0}}));
  }
}

// The dp layer's track of a rank: its backward passes and bucket all-reduces.
void addSpans(json& events, const Dump& d, int pid, int tid, int64_t origin) {
  for (const auto& s : d.spans) {
    if (s.startUs == 0 || s.endUs < s.startUs) continue;
    const std::string step = " (step " + std::to_string(s.step) + ")";
    if (s.kind == "compute") {
      events.push_back(
          slice("backward" + step, "dp", pid, tid, s.startUs, s.endUs, origin, {{"step", s.step}}));
      continue;
    }
    if (s.kind != "bucket") continue;
    json args = {{"step", s.step},
                 {"bucket", s.bucket},
                 {"bytes", s.bytes},
                 {"wait_for_slowest_us", s.waitUs},
                 {"transfer_us", s.transferUs}};
    if (s.call >= 0) args["call"] = "allreduce #" + std::to_string(s.call);
    if (s.lastPeer >= 0) args["last_peer"] = s.lastPeer;
    events.push_back(slice("bucket " + std::to_string(s.bucket) + step, "dp", pid, tid, s.startUs,
                           s.endUs, origin, std::move(args)));
  }
}

}  // namespace

json chromeTrace(const std::vector<Dump>& dumps) {
  int64_t origin = INT64_MAX;
  for (const auto& d : dumps) {
    for (const auto& e : d.entries) {
      int64_t start = e.issuedUs ? e.issuedUs : e.startedUs;
      if (start) origin = std::min(origin, start);
    }
    for (const auto& s : d.spans) {
      if (s.startUs) origin = std::min(origin, s.startUs);
    }
  }
  if (origin == INT64_MAX) origin = 0;
  json events = json::array();
  std::map<std::string, int> pids;
  for (const auto& d : dumps) {
    auto [it, added] = pids.emplace(d.communicator, static_cast<int>(pids.size()) + 1);
    const int pid = it->second;
    if (added) {
      events.push_back(
          metadata("process_name", pid, 0, {{"name", "communicator " + d.communicator}}));
    }
    events.push_back(metadata("thread_name", pid, d.rank,
                              {{"name", "rank " + std::to_string(d.rank) + " (" + d.host + ")"}}));
    events.push_back(metadata("thread_sort_index", pid, d.rank, {{"sort_index", 2 * d.rank}}));
    addCalls(events, d, pid, origin);
    if (d.spans.empty()) continue;
    // A second track per rank, right below its calls; its thread id stays clear of the ranks'.
    const int dpTid = d.size + d.rank;
    events.push_back(
        metadata("thread_name", pid, dpTid, {{"name", "rank " + std::to_string(d.rank) + " dp"}}));
    events.push_back(metadata("thread_sort_index", pid, dpTid, {{"sort_index", 2 * d.rank + 1}}));
    addSpans(events, d, pid, dpTid, origin);
  }
  return {{"traceEvents", events},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"origin_us", origin}, {"source", "chorus-doctor"}}}};
}

}  // namespace chorus::doctor
