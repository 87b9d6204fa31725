// Writing dumps and progress records with common/json.h: a few fields, no dependency.
#include "trace/json_out.h"

#include "common/errno_text.h"
#include "common/json.h"
#include "trace/clock.h"

#include <chorus/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>

namespace chorus::trace {
namespace {

bool reduces(CollectiveKind k) {
  return k == CollectiveKind::kAllReduce || k == CollectiveKind::kReduceScatter ||
         k == CollectiveKind::kReduce || k == CollectiveKind::kReduceScatterV;
}

bool hasRoot(CollectiveKind k) {
  return k == CollectiveKind::kBroadcast || k == CollectiveKind::kReduce ||
         k == CollectiveKind::kGather || k == CollectiveKind::kScatter;
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

void header(std::string& out, const Subject& s) {
  json::field(out, "communicator", s.id);
  out += ", ";
  json::number(out, "rank", s.recorder.rank());
  out += ", ";
  json::number(out, "size", s.recorder.size());
  out += ", ";
  json::field(out, "host", hostName());
  out += ", ";
  json::number(out, "pid", static_cast<long>(getpid()));
}

void entryJson(std::string& out, const EntryCopy& e) {
  out += "{";
  json::number(out, "number", e.number);
  out += ", ";
  json::field(out, "collective", toString(e.kind));
  out += ", ";
  json::field(out, "algorithm", e.started ? toString(e.algo) : "");
  out += ", ";
  json::field(out, "dtype", toString(e.dtype));
  out += ", ";
  json::field(out, "op", reduces(e.kind) ? toString(e.op) : "");
  out += ", ";
  if (e.wire != WireFormat::kNative) {  // only where a call chose a reduced-precision format
    json::field(out, "wire", toString(e.wire));
    out += ", ";
  }
  json::number(out, "count", e.count);
  out += ", ";
  json::number(out, "bytes", e.bytes);
  out += ", ";
  json::number(out, "root", hasRoot(e.kind) ? e.root : -1);
  out += ", ";
  json::field(out, "state", toString(e.state));
  out += ", ";
  json::number(out, "waiting_on", e.state == CallState::kWaiting ? e.waitingOn : -1);
  out += ", ";
  json::number(out, "issued_us", e.issuedUs);
  out += ", ";
  json::number(out, "started_us", e.startedUs);
  out += ", ";
  json::number(out, "ended_us", e.endedUs);
  // Only where a call's traffic was not followed (its peers list is then empty; older dumps
  // follow every call).
  if (!e.detailed) out += ", \"detailed\": false";
  out += ", \"peers\": [";
  for (int i = 0; i < e.peerCount; ++i) {
    const auto& p = e.peers[i];
    if (i > 0) out += ", ";
    out += "{";
    json::number(out, "rank", p.rank);
    out += ", ";
    json::number(out, "sent", p.sent);
    out += ", ";
    json::number(out, "received", p.received);
    out += ", ";
    json::number(out, "first_arrival_us", p.firstArrivalUs);
    out += "}";
  }
  out += "]}";
}

void spanJson(std::string& out, const SpanRecord& s, const WallClock& clock) {
  out += "{";
  json::field(out, "kind", toString(s.kind));
  out += ", ";
  json::number(out, "step", s.step);
  out += ", ";
  json::number(out, "start_us", clock.micros(s.startAt));
  out += ", ";
  json::number(out, "end_us", clock.micros(s.endAt));
  if (s.kind == SpanKind::kBucket) {
    out += ", ";
    json::number(out, "bucket", s.index);
    out += ", ";
    json::number(out, "bytes", s.bytes);
    out += ", ";
    json::number(out, "call", s.call);
    out += ", ";
    json::number(out, "wait_us",
                 static_cast<uint64_t>(clock.microsOf(static_cast<double>(s.waitTicks))));
    out += ", ";
    json::number(out, "transfer_us",
                 static_cast<uint64_t>(clock.microsOf(static_cast<double>(s.transferTicks))));
    out += ", ";
    json::number(out, "last_peer", s.lastPeer);
  }
  out += "}";
}

}  // namespace

std::string dumpJson(const Subject& s, const char* reason, const std::string* error) {
  const Recorder& r = s.recorder;
  // Entries first: `recorded` is read after them, so it counts at least every entry listed.
  const WallClock clock = WallClock::now();
  std::vector<EntryCopy> entries = r.entries(clock);
  StragglerCopy st = r.stragglers(clock);
  const std::vector<SpanRecord> spans = s.spans.spans();
  std::string out;
  out.reserve(512 + entries.size() * 400);
  out += "{\n  ";
  json::field(out, "format", "chorus-trace/1");
  out += ",\n  ";
  header(out, s);
  out += ",\n  ";
  json::field(out, "reason", reason);
  out += ",\n  \"error\": ";
  if (error) {
    json::quote(out, *error);
  } else {
    out += "null";
  }
  out += ",\n  ";
  json::number(out, "dumped_us", wallMicros());
  out += ",\n  ";
  json::number(out, "capacity", r.capacity());
  out += ",\n  ";
  json::number(out, "recorded", r.recorded());
  out += ",\n  \"entries\": [";
  for (size_t i = 0; i < entries.size(); ++i) {
    out += i == 0 ? "\n    " : ",\n    ";
    entryJson(out, entries[i]);
  }
  out += entries.empty() ? "],\n" : "\n  ],\n";
  out += "  \"stragglers\": {";
  json::number(out, "collectives", st.collectives);
  out += ", \"ranks\": [";
  for (size_t i = 0; i < st.ranks.size(); ++i) {
    const auto& q = st.ranks[i];
    out += i == 0 ? "\n    {" : ",\n    {";
    json::number(out, "rank", q.rank);
    out += ", ";
    json::number(out, "last", q.last);
    out += ", ";
    json::number(out, "lag_samples", q.lagSamples);
    out += ", ";
    json::number(out, "median_lag_us", q.medianLagUs);
    out += ", ";
    json::number(out, "p99_lag_us", q.p99LagUs);
    out += "}";
  }
  out += st.ranks.empty() ? "]},\n" : "\n  ]},\n";
  out += "  \"spans\": [";
  for (size_t i = 0; i < spans.size(); ++i) {
    out += i == 0 ? "\n    " : ",\n    ";
    spanJson(out, spans[i], clock);
  }
  out += spans.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

std::string progressJson(const Subject& s) {
  const Recorder& r = s.recorder;
  const WallClock clock = WallClock::now();
  EntryCopy cur;
  const bool pending = r.oldestPending(&cur, clock);
  std::string out = "{";
  json::field(out, "format", "chorus-progress/1");
  out += ", ";
  header(out, s);
  out += ", ";
  json::number(out, "issued", r.issued());
  out += ", ";
  json::number(out, "completed", r.completed());
  out += ", ";
  json::field(out, "state", pending ? toString(cur.state) : "idle");
  out += ", \"current\": ";
  if (pending) {
    out += "{";
    json::number(out, "number", cur.number);
    out += ", ";
    json::field(out, "collective", toString(cur.kind));
    out += ", ";
    json::number(out, "waiting_on", cur.state == CallState::kWaiting ? cur.waitingOn : -1);
    out += ", ";
    json::number(out, "since_us", cur.startedUs != 0 ? cur.startedUs : cur.issuedUs);
    out += "}";
  } else {
    out += "null";
  }
  out += ", ";
  json::number(out, "last_progress_us", r.lastProgressUs(clock));
  out +=
      s.paused.load(std::memory_order_relaxed) ? ", \"paused\": true, " : ", \"paused\": false, ";
  json::number(out, "published_us", wallMicros());
  out += "}";
  return out;
}

std::string writeDump(const Subject& s, const std::string& dir, const char* reason,
                      const std::string* error) {
  static std::atomic<uint64_t> serial{0};
  const std::string name =
      "chorus-trace-" + s.id + "-rank" + std::to_string(s.recorder.rank()) + ".json";
  const std::string path = dir + "/" + name;
  const std::string tmp = dir + "/." + name + "." + std::to_string(getpid()) + "." +
                          std::to_string(serial.fetch_add(1)) + ".tmp";
  const std::string text = dumpJson(s, reason, error);
  auto fail = [&](const char* what) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Error(ErrorCode::kSystem, std::string("trace dump: ") + what + " " + tmp + ": " +
                                         errnoText(err) + " (CHORUS_TRACE_DIR / dump directory '" +
                                         dir + "')");
  };
  ::mkdir(dir.c_str(), 0777);  // one level, as a convenience; an error shows at open
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw fail("cannot create");
  size_t done = 0;
  while (done < text.size()) {
    ssize_t k = ::write(fd, text.data() + done, text.size() - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      Error e = fail("cannot write");
      ::close(fd);
      throw e;
    }
    done += static_cast<size_t>(k);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw fail("cannot rename");
  return path;
}

std::string stragglerText(const StragglerCopy& st, int reporter) {
  std::string out;
  if (st.collectives == 0) return out;
  for (const auto& q : st.ranks) {
    char line[400];
    const double pct = 100.0 * static_cast<double>(q.last) / static_cast<double>(st.collectives);
    if (q.lagSamples == 0) {
      std::snprintf(line, sizeof(line),
                    "chorus: straggler report (%" PRIu64
                    " collectives seen by rank %d): rank %d arrived last in %.0f%% of calls "
                    "(the others' messages were already there: by how much, their reports say)\n",
                    st.collectives, reporter, q.rank, pct);
    } else {
      std::snprintf(line, sizeof(line),
                    "chorus: straggler report (%" PRIu64
                    " collectives seen by rank %d): rank %d arrived last in %.0f%% of calls, "
                    "%.3g ms behind at the median (p99 %.3g ms)\n",
                    st.collectives, reporter, q.rank, pct,
                    static_cast<double>(q.medianLagUs) / 1000.0,
                    static_cast<double>(q.p99LagUs) / 1000.0);
    }
    out += line;
  }
  return out;
}

std::string Subject::hexId(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

}  // namespace chorus::trace
