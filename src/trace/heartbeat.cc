#include "trace/heartbeat.h"

#include "trace/clock.h"

#include <chorus/error.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

namespace chorus::trace {
namespace {

// Records read per check at most: beyond this the reads would delay the publishing itself.
constexpr int kMaxPeersRead = 1024;

// The number after "\"<key>\": " in a one-line record; -1 when absent.
long long numberAfter(const std::string& text, const char* name) {
  const std::string key = std::string("\"") + name + "\": ";
  const size_t at = text.find(key);
  if (at == std::string::npos) return -1;
  return std::strtoll(text.c_str() + at + key.size(), nullptr, 10);
}

// `peer`'s latest record, or "" when there is none or the store did not answer; *absent says
// which: true when the store answered that there is none.
std::string recordOf(const Subject& subject, int peer, bool* absent) {
  const std::string key = "chorus/progress/" + subject.id + "/" + std::to_string(peer);
  *absent = false;
  try {
    if (!subject.rootStore->check({key})) {
      *absent = true;
      return "";
    }
    const Store::Bytes bytes = subject.rootStore->get(key, std::chrono::milliseconds(200));
    return std::string(bytes.begin(), bytes.end());
  } catch (const Error&) {
    return "";  // the store is slow or gone: no verdict on the peer from that
  }
}

// When `peer` last published, or -1 for no verdict. A peer with no record at all (stopped
// before its first one) counts as having published when the records started here: every live
// rank publishes its first within a period of that.
long long publishedTime(const Subject& subject, const std::string& text, bool absent) {
  if (!text.empty()) return numberAfter(text, "published_us");
  if (absent && subject.recordsSinceUs != 0) return static_cast<long long>(subject.recordsSinceUs);
  return -1;
}

long long recordTime(const Subject& subject, int peer) {
  bool absent = false;
  const std::string text = recordOf(subject, peer, &absent);
  return publishedTime(subject, text, absent);
}

// How long a live peer had been in no call when it published `text` (idle, not paused, its last
// call over that long before): -1 when it was in a call, paused, or the record says too little.
double idleSecondsOf(const std::string& text) {
  if (text.find("\"state\": \"idle\"") == std::string::npos) return -1;
  if (text.find("\"paused\": true") != std::string::npos) return -1;
  const long long published = numberAfter(text, "published_us");
  const long long last = numberAfter(text, "last_progress_us");
  if (published <= 0 || last <= 0 || published < last) return -1;
  return static_cast<double>(published - last) / 1e6;
}

}  // namespace

std::vector<int> silentPeers(const Subject& subject, uint64_t nowUs) {
  const Settings& s = subject.settings;
  const Recorder& r = subject.recorder;
  std::vector<int> out;
  if (s.heartbeatSeconds <= 0 || !subject.rootStore || !r.enabled() || r.size() > kMaxPeersRead) {
    return out;
  }
  const auto limitUs = static_cast<uint64_t>(s.heartbeatSeconds * 1e6);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (int peer = 0; peer < r.size(); ++peer) {
    if (peer == r.rank()) continue;
    if (std::chrono::steady_clock::now() >= deadline) break;
    const long long published = recordTime(subject, peer);
    if (published >= 0 && nowUs >= static_cast<uint64_t>(published) + limitUs) out.push_back(peer);
  }
  return out;
}

double publishPeriodSeconds(const Settings& s) {
  if (s.heartbeatSeconds > 0) return std::min(s.progressSeconds, s.heartbeatSeconds / 4);
  return s.progressSeconds;
}

void checkHeartbeats(Subject& subject, uint64_t nowUs) {
  const Settings& s = subject.settings;
  const Recorder& r = subject.recorder;
  if (s.heartbeatSeconds <= 0 || !subject.rootStore || !subject.onSilentPeer || !r.enabled() ||
      r.size() > kMaxPeersRead) {
    return;
  }
  const auto limitUs = static_cast<uint64_t>(s.heartbeatSeconds * 1e6);
  const double stall = subject.stallSeconds.load(std::memory_order_relaxed);
  const auto stallUs = static_cast<uint64_t>(stall > 0 ? stall * 1e6 : 0);
  EntryCopy pending;
  if (!r.oldestPending(&pending, WallClock::now())) return;
  const uint64_t sinceUs = pending.startedUs != 0 ? pending.startedUs : pending.issuedUs;
  const bool judgeSilence = sinceUs != 0 && nowUs >= sinceUs + limitUs;
  // A stall is judged only on a peer that was itself idle that long when it last published, so
  // a record a period old never makes a peer that just entered the call look stalled.
  const bool judgeStall =
      stallUs > 0 && subject.onStalledPeer && sinceUs != 0 && nowUs >= sinceUs + stallUs;
  if (!judgeSilence && !judgeStall) return;  // not waiting long enough to judge
  subject.reportedSilent.resize(static_cast<size_t>(r.size()));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (int peer = 0; peer < r.size(); ++peer) {
    if (peer == r.rank() || subject.reportedSilent[static_cast<size_t>(peer)]) continue;
    if (std::chrono::steady_clock::now() >= deadline) return;  // the rest at the next period
    bool absent = false;
    const std::string text = recordOf(subject, peer, &absent);
    const long long published = publishedTime(subject, text, absent);
    if (published < 0) continue;
    if (judgeSilence && nowUs >= static_cast<uint64_t>(published) + limitUs) {
      subject.reportedSilent[static_cast<size_t>(peer)] = true;
      subject.onSilentPeer(peer,
                           static_cast<double>(nowUs - static_cast<uint64_t>(published)) / 1e6);
      continue;
    }
    const double idle = judgeStall ? idleSecondsOf(text) : -1;
    if (idle >= stall) {
      subject.reportedSilent[static_cast<size_t>(peer)] = true;
      subject.onStalledPeer(peer, idle);
    }
  }
}

}  // namespace chorus::trace
