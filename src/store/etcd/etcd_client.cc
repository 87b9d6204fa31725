#include "store/etcd/etcd_client.h"

#include <chorus/error.hpp>

#include <algorithm>
#include <charconv>
#include <thread>

#include "store/etcd/base64.h"

namespace chorus::store::etcd {
namespace {

using std::chrono::milliseconds;

// A member that does not accept the connection by then is taken for down (loopback and a LAN
// connect in well under a millisecond; a partitioned host never does).
constexpr milliseconds kConnectTimeout{1000};
// ... but a caller's deadline shorter than 1 s per member is shared among them, down to this.
constexpr milliseconds kMinConnectTimeout{100};
// The most one request waits for one member before the next is tried: a member cut off from
// the leader holds a write until its own request timeout (seconds), while another member
// could serve it at once.
constexpr milliseconds kAttemptTimeout{3000};
// A watch is renewed this often, so that a member that stopped answering (stopped, cut off) is
// noticed by the read that follows, and another one watched.
constexpr milliseconds kWatchSlice{2000};
// Pauses between rounds over the members: the time an election takes is counted in hundreds of
// milliseconds, so the pause grows to that and no further.
constexpr int kFirstPauseMs = 10;
constexpr int kMaxPauseMs = 200;

milliseconds remaining(const Deadline& d) { return milliseconds(d.remainingMs()); }

// gRPC status codes that a later try, or another member, may not meet again: unavailable (no
// leader, leader changed), deadline exceeded (request timed out), resource exhausted (too many
// requests), aborted.
bool retryable(int grpcCode) {
  return grpcCode == 14 || grpcCode == 4 || grpcCode == 8 || grpcCode == 10;
}

std::string firstLine(std::string_view text) {
  text = text.substr(0, text.find('\n'));
  return std::string(text.substr(0, 300));
}

}  // namespace

int64_t intField(const Json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const std::string& text = it->get_ref<const std::string&>();
    int64_t out = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    if (ec == std::errc() && end == text.data() + text.size()) return out;
  }
  throw Error(ErrorCode::kSystem, std::string("etcd store: field '") + name + "' is not a number");
}

std::string bytesField(const Json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end()) return {};
  auto decoded = it->is_string() ? base64Decode(it->get<std::string>()) : std::nullopt;
  if (!decoded) {
    throw Error(ErrorCode::kSystem, std::string("etcd store: field '") + name + "' is not base64");
  }
  return *decoded;
}

KeyRead readRange(const Json& rangeReply) {
  KeyRead read;
  read.storeRevision = intField(rangeReply.value("header", Json::object()), "revision");
  auto kvs = rangeReply.find("kvs");
  if (kvs != rangeReply.end() && kvs->is_array() && !kvs->empty()) {
    read.value = bytesField((*kvs)[0], "value");
    read.modRevision = intField((*kvs)[0], "mod_revision");
  }
  return read;
}

EtcdClient::EtcdClient(std::vector<HostPort> endpoints, bool https, TlsFiles tls)
    : endpoints_(std::move(endpoints)),
      https_(https),
      clientCertificate_(!tls.cert.empty()),
      http_(std::move(tls)) {
  if (endpoints_.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "etcd store: no member to talk to");
  }
}

std::string EtcdClient::urlOf(size_t member, const std::string& path) const {
  const HostPort& hp = endpoints_[member];
  const bool v6 = hp.host.find(':') != std::string::npos;
  return (https_ ? "https://" : "http://") + (v6 ? "[" + hp.host + "]" : hp.host) + ":" +
         std::to_string(hp.port) + path;
}

std::string EtcdClient::endpointsText() const {
  std::string out;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const HostPort& hp = endpoints_[i];
    if (i > 0) out += ",";
    out += (hp.host.find(':') != std::string::npos ? "[" + hp.host + "]" : hp.host) + ":" +
           std::to_string(hp.port);
  }
  return out;
}

Json EtcdClient::call(const std::string& what, const std::string& path, const Json& request,
                      const Deadline& deadline) {
  const std::string body = request.dump();
  const auto start = Clock::now();
  std::vector<std::string> why(endpoints_.size(), "not tried");
  int pauseMs = kFirstPauseMs;
  for (bool first = true;; first = false) {
    const size_t from = preferred_.load();
    for (size_t n = 0; n < endpoints_.size(); ++n) {
      const size_t i = (from + n) % endpoints_.size();
      if (!first && deadline.expired()) break;
      const milliseconds left = std::max(remaining(deadline), milliseconds(1));
      // A short deadline is shared among the members, so that one cut off does not use it up.
      const auto members = static_cast<milliseconds::rep>(endpoints_.size());
      const milliseconds connect =
          std::min({left, kConnectTimeout, std::max(left / members, kMinConnectTimeout)});
      requests_.fetch_add(1);
      HttpReply reply = http_.post(urlOf(i, path), body, std::min(left, kAttemptTimeout), connect);
      if (!reply.answered) {
        why[i] = reply.error;
        if (reply.fatal) {
          throw Error(ErrorCode::kSystem,
                      "etcd store: " + what + ": " + urlOf(i, "") + ": " + reply.error);
        }
        continue;
      }
      Json parsed = Json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
      if (reply.status == 200 && parsed.is_object()) {
        preferred_.store(i);
        return parsed;
      }
      const int code = parsed.is_object() ? static_cast<int>(intField(parsed, "code")) : 0;
      const bool hasMessage =
          parsed.is_object() && parsed.contains("message") && parsed["message"].is_string();
      const std::string message =
          hasMessage ? parsed["message"].get<std::string>() : firstLine(reply.body);
      why[i] = "HTTP " + std::to_string(reply.status) + ": " + message;
      if (code != 0 && !retryable(code)) {
        throw Error(code == 3 ? ErrorCode::kInvalidArgument : ErrorCode::kSystem,
                    "etcd store: " + what + " refused by " + urlOf(i, "") + ": " + message);
      }
      if (code == 0 && reply.status < 500) {  // not the gateway: something else on that port
        throw Error(ErrorCode::kSystem, "etcd store: " + what + ": " + urlOf(i, path) +
                                            " is not an etcd v3 gateway (" + why[i] + ")");
      }
    }
    if (deadline.expired()) break;
    std::this_thread::sleep_for(std::min(milliseconds(pauseMs), remaining(deadline)));
    pauseMs = std::min(pauseMs * 2, kMaxPauseMs);
  }
  std::string tried;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    tried += (i > 0 ? "; " : "") + urlOf(i, "") + " (" + why[i] + ")";
  }
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  // A member that wants a client certificate ends the handshake in words that do not say so.
  const std::string hint = https_ && !clientCertificate_
                               ? " (no client certificate was given: CHORUS_ETCD_CERT and "
                                 "CHORUS_ETCD_KEY, where the members ask for one)"
                               : "";
  throw Error(ErrorCode::kTimeout, "etcd store: no member answered " + what + " within " +
                                       std::to_string(took) + " ms; tried " + tried + hint);
}

bool EtcdClient::watchForPut(const std::string& key, int64_t readAt, bool fromNow,
                             const Deadline& until, std::string* value) {
  Json create = {{"key", base64Encode(key)}, {"filters", Json::array({"NODELETE"})}};
  if (!fromNow) create["start_revision"] = std::to_string(readAt + 1);
  const std::string body = Json{{"create_request", create}}.dump();
  const Deadline slice(std::min(until.at(), Clock::now() + kWatchSlice));
  bool got = false;
  std::string pending;
  // Replies come one JSON object a line: "created", then the events.
  auto reader = [&](std::string_view chunk) {
    pending.append(chunk);
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      Json line = Json::parse(pending.substr(0, nl), nullptr, false);
      pending.erase(0, nl + 1);
      if (!line.is_object() || !line.contains("result")) return false;  // an error: read again
      const Json& result = line["result"];
      if (result.value("canceled", false) || intField(result, "compact_revision") != 0) {
        return false;
      }
      // Watching from the present: a write between the caller's read and now may have been the
      // key's, so the caller reads again.
      if (fromNow && result.value("created", false) &&
          intField(result.value("header", Json::object()), "revision") != readAt) {
        return false;
      }
      auto events = result.find("events");
      if (events == result.end() || !events->is_array()) continue;
      for (const Json& event : *events) {
        if (event.value("type", std::string("PUT")) != "PUT") continue;
        *value = bytesField(event.value("kv", Json::object()), "value");
        got = true;
        return false;
      }
    }
    return true;
  };
  const size_t start = preferred_.load();
  for (size_t n = 0; n < endpoints_.size() && !got && !slice.expired(); ++n) {
    const size_t i = (start + n) % endpoints_.size();
    requests_.fetch_add(1);
    HttpReply reply = http_.post(urlOf(i, "/v3/watch"), body, remaining(slice),
                                 std::min(remaining(slice), kConnectTimeout), reader);
    if (got) return true;
    // The member watched until the slice ended, or stopped the watch: the caller reads again.
    if (reply.answered) return false;
  }
  return got;
}

}  // namespace chorus::store::etcd
