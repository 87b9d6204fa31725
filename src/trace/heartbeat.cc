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

// The number after "\"published_us\": " in a one-line record; -1 when absent.
long long publishedUs(const std::string& text) {
  static const std::string key = "\"published_us\": ";
  const size_t at = text.find(key);
  if (at == std::string::npos) return -1;
  return std::strtoll(text.c_str() + at + key.size(), nullptr, 10);
}

// The time stamp of `peer`'s latest record, or -1 when there is none or the store did not answer.
long long recordTime(const Subject& subject, int peer) {
  const std::string key = "chorus/progress/" + subject.id + "/" + std::to_string(peer);
  try {
    if (!subject.rootStore->check({key})) return -1;
    const Store::Bytes bytes = subject.rootStore->get(key, std::chrono::milliseconds(200));
    return publishedUs(std::string(bytes.begin(), bytes.end()));
  } catch (const Error&) {
    return -1;  // the store is slow or gone: no verdict on the peer from that
  }
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
  EntryCopy pending;
  if (!r.oldestPending(&pending, WallClock::now())) return;
  const uint64_t sinceUs = pending.startedUs != 0 ? pending.startedUs : pending.issuedUs;
  if (sinceUs == 0 || nowUs < sinceUs + limitUs) return;  // not waiting long enough to judge
  subject.reportedSilent.resize(static_cast<size_t>(r.size()));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (int peer = 0; peer < r.size(); ++peer) {
    if (peer == r.rank() || subject.reportedSilent[static_cast<size_t>(peer)]) continue;
    if (std::chrono::steady_clock::now() >= deadline) return;  // the rest at the next period
    const long long published = recordTime(subject, peer);
    if (published < 0 || nowUs < static_cast<uint64_t>(published) + limitUs) continue;
    subject.reportedSilent[static_cast<size_t>(peer)] = true;
    subject.onSilentPeer(peer, static_cast<double>(nowUs - static_cast<uint64_t>(published)) / 1e6);
  }
}

}  // namespace chorus::trace
