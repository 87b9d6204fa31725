#include <nlohmann/json.hpp>

#include <time.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "trace.h"

namespace chorus::doctor {
namespace {

using nlohmann::json;

// A missing or null field reads as its default: older or partial writers stay readable.
template <typename T>
T field(const json& object, const char* key, T fallback) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  return it->get<T>();
}

PeerIo parsePeer(const json& j) {
  PeerIo p;
  p.rank = field(j, "rank", -1);
  p.sent = field<int64_t>(j, "sent", 0);
  p.received = field<int64_t>(j, "received", 0);
  p.firstArrivalUs = field<int64_t>(j, "first_arrival_us", 0);
  return p;
}

Entry parseEntry(const json& j) {
  Entry e;
  e.number = j.at("number").get<int64_t>();
  e.collective = j.at("collective").get<std::string>();
  e.algorithm = field<std::string>(j, "algorithm", "");
  e.dtype = field<std::string>(j, "dtype", "");
  e.op = field<std::string>(j, "op", "");
  e.count = field<int64_t>(j, "count", 0);
  e.bytes = field<int64_t>(j, "bytes", 0);
  e.root = field(j, "root", -1);
  e.state = j.at("state").get<std::string>();
  e.waitingOn = field(j, "waiting_on", -1);
  e.issuedUs = field<int64_t>(j, "issued_us", 0);
  e.startedUs = field<int64_t>(j, "started_us", 0);
  e.endedUs = field<int64_t>(j, "ended_us", 0);
  e.detailed = field<bool>(j, "detailed", true);
  if (auto it = j.find("peers"); it != j.end() && it->is_array()) {
    for (const auto& p : *it) e.peers.push_back(parsePeer(p));
  }
  return e;
}

Span parseSpan(const json& j) {
  Span s;
  s.kind = field<std::string>(j, "kind", "");
  s.step = field<int64_t>(j, "step", 0);
  s.startUs = field<int64_t>(j, "start_us", 0);
  s.endUs = field<int64_t>(j, "end_us", 0);
  s.bucket = field(j, "bucket", -1);
  s.bytes = field<int64_t>(j, "bytes", 0);
  s.call = field<int64_t>(j, "call", -1);
  s.waitUs = field<int64_t>(j, "wait_us", 0);
  s.transferUs = field<int64_t>(j, "transfer_us", 0);
  s.lastPeer = field(j, "last_peer", -1);
  return s;
}

}  // namespace

std::string Entry::name() const { return collective + " #" + std::to_string(number); }

std::string Entry::signature() const {
  std::string s = collective + "(" + dtype;
  if (!op.empty()) s += ", " + op;
  s += ", " + std::to_string(count);
  if (root >= 0) s += ", root " + std::to_string(root);
  return s + ")";
}

const PeerIo* Entry::peer(int rank) const {
  for (const auto& p : peers) {
    if (p.rank == rank) return &p;
  }
  return nullptr;
}

const Entry* Dump::collective(int64_t number) const {
  for (const auto& e : entries) {
    if (e.number == number && e.collective != "send_recv") return &e;
  }
  return nullptr;
}

const Entry* Dump::lastCollective() const {
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->collective != "send_recv") return &*it;
  }
  return nullptr;
}

Dump loadDump(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  try {
    json j = json::parse(in);
    if (field<std::string>(j, "format", "") != "chorus-trace/1") {
      throw std::runtime_error("not a chorus-trace/1 dump (\"format\" is missing or differs)");
    }
    Dump d;
    d.path = path;
    d.communicator = j.at("communicator").get<std::string>();
    d.rank = j.at("rank").get<int>();
    d.size = j.at("size").get<int>();
    d.host = field<std::string>(j, "host", "");
    d.pid = field<int64_t>(j, "pid", 0);
    d.reason = field<std::string>(j, "reason", "");
    if (auto it = j.find("error"); it != j.end() && it->is_string())
      d.error = it->get<std::string>();
    d.dumpedUs = field<int64_t>(j, "dumped_us", 0);
    d.capacity = field<int64_t>(j, "capacity", 0);
    d.recorded = field<int64_t>(j, "recorded", 0);
    for (const auto& e : j.at("entries")) d.entries.push_back(parseEntry(e));
    if (auto it = j.find("spans"); it != j.end() && it->is_array()) {
      for (const auto& s : *it) d.spans.push_back(parseSpan(s));
    }
    return d;
  } catch (const json::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).rfind(path, 0) == 0) throw;
    throw std::runtime_error(path + ": " + e.what());
  }
}

LoadedDumps loadDumps(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw std::runtime_error(dir + ": " + ec.message());
  LoadedDumps result;
  std::map<std::pair<std::string, int>, Dump> newest;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("chorus-trace-", 0) != 0 || !name.ends_with(".json")) continue;
    try {
      Dump d = loadDump(entry.path().string());
      auto key = std::make_pair(d.communicator, d.rank);
      auto found = newest.find(key);
      if (found == newest.end() || found->second.dumpedUs < d.dumpedUs) {
        newest.insert_or_assign(key, std::move(d));
      }
    } catch (const std::exception& e) {
      result.problems.push_back(e.what());
    }
  }
  for (auto& [key, d] : newest) result.dumps.push_back(std::move(d));
  std::sort(result.problems.begin(), result.problems.end());
  return result;
}

Progress parseProgress(const std::string& text) {
  try {
    json j = json::parse(text);
    if (field<std::string>(j, "format", "") != "chorus-progress/1") {
      throw std::runtime_error("not a chorus-progress/1 record");
    }
    Progress p;
    p.communicator = j.at("communicator").get<std::string>();
    p.rank = j.at("rank").get<int>();
    p.size = field(j, "size", 0);
    p.host = field<std::string>(j, "host", "");
    p.pid = field<int64_t>(j, "pid", 0);
    p.issued = field<int64_t>(j, "issued", 0);
    p.completed = field<int64_t>(j, "completed", 0);
    p.state = field<std::string>(j, "state", "");
    if (auto it = j.find("current"); it != j.end() && it->is_object()) {
      p.hasCurrent = true;
      p.currentNumber = field<int64_t>(*it, "number", 0);
      p.currentCollective = field<std::string>(*it, "collective", "");
      p.currentWaitingOn = field(*it, "waiting_on", -1);
      p.currentSinceUs = field<int64_t>(*it, "since_us", 0);
    }
    p.lastProgressUs = field<int64_t>(j, "last_progress_us", 0);
    p.publishedUs = field<int64_t>(j, "published_us", 0);
    return p;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("bad progress record: ") + e.what());
  }
}

int64_t nowUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

}  // namespace chorus::doctor
