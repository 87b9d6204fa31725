// Every CHORUS_* setting of the library, read here and only here (docs/config.md, "Who reads
// what"; scripts/check-doc-links refuses another reader in src/). Defaults live in the structs
// of chorus/options.hpp; a malformed value throws Error(kInvalidArgument) naming the variable.
#include "common/options_env.h"

#include "common/env_vars.h"

#include <chorus/error.hpp>

#include <csignal>
#include <cstdlib>
#include <optional>
#include <string>

namespace chorus {
namespace {

std::optional<std::string> env(const char* name) { return envVar(name); }

long long number(const char* name, const std::string& text, long long lo, long long hi) {
  return parseEnvNumber(name, text, lo, hi);
}

double parseSeconds(const char* name, const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    used = 0;
  }
  if (used != text.size() || !(v > 0) || v > 1e7) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(name) + "='" + text + "' is not a positive number of seconds");
  }
  return v;
}

// The store limits' variables: a number in range, or the default when unset.
long long numberOr(const char* name, long long fallback, long long lo, long long hi) {
  auto text = env(name);
  return text ? number(name, *text, lo, hi) : fallback;
}

// The largest value a store request's body can carry (store/tcp_store_protocol.h's kMaxBody)
// less the request's own header.
constexpr long long kMaxStoreValue = (64LL << 20) - 16;

}  // namespace

void applyTuningOverridesFromEnv(Tuning& tuning) {
  if (auto v = env("CHORUS_RING_BIDIR_BYTES")) {
    tuning.ringBidirectionalBytes =
        static_cast<double>(number("CHORUS_RING_BIDIR_BYTES", *v, 0, 1LL << 50));
  }
}

TraceOptions TraceOptions::fromEnv() {
  TraceOptions s;
  if (auto v = env("CHORUS_TRACE_ENTRIES")) {
    s.entries = static_cast<size_t>(number("CHORUS_TRACE_ENTRIES", *v, 0, 1 << 24));
  }
  if (auto v = env("CHORUS_TRACE_DIR")) s.dir = *v;
  if (auto v = env("CHORUS_TRACE_SIGNAL")) {
    if (*v == "USR1" || *v == "SIGUSR1") {
      s.signal = SIGUSR1;
    } else if (*v == "USR2" || *v == "SIGUSR2") {
      s.signal = SIGUSR2;
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  "CHORUS_TRACE_SIGNAL='" + *v + "' is not USR1 or USR2");
    }
  }
  if (auto v = env("CHORUS_PROGRESS_SECONDS")) {
    char* end = nullptr;
    double d = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(d >= 0) || d > 86400) {
      throw Error(ErrorCode::kInvalidArgument,
                  "CHORUS_PROGRESS_SECONDS='" + *v + "' is not a number of seconds in [0, 86400]");
    }
    s.progressSeconds = d;
  }
  if (auto v = env("CHORUS_HEARTBEAT_SECONDS")) {
    char* end = nullptr;
    double d = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(d >= 0) || d > 86400) {
      throw Error(ErrorCode::kInvalidArgument,
                  "CHORUS_HEARTBEAT_SECONDS='" + *v + "' is not a number of seconds in [0, 86400]");
    }
    s.heartbeatSeconds = d;
  }
  if (auto v = env("CHORUS_REPORT")) s.report = *v == "1";
  if (auto v = env("CHORUS_TRACE_DETAIL_US")) {
    s.detailMicros = static_cast<double>(number("CHORUS_TRACE_DETAIL_US", *v, 0, 60000000));
  }
  return s;
}

AuthOptions AuthOptions::fromEnv() {
  AuthOptions s;
  if (auto mode = env("CHORUS_AUTH")) {
    if (*mode == "auto") {
      s.mode = AuthMode::kAuto;
    } else if (*mode == "off") {
      s.mode = AuthMode::kOff;
    } else if (*mode == "required") {
      s.mode = AuthMode::kRequired;
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  "CHORUS_AUTH='" + *mode + "' is not one of auto, off, required");
    }
  }
  if (auto t = env("CHORUS_HANDSHAKE_TIMEOUT")) {
    s.handshakeTimeout = std::chrono::seconds(number("CHORUS_HANDSHAKE_TIMEOUT", *t, 1, 3600));
  }
  if (auto e = env("CHORUS_ENCRYPT")) {
    if (*e != "0" && *e != "1") {
      throw Error(ErrorCode::kInvalidArgument, "CHORUS_ENCRYPT='" + *e + "' is not 0 or 1");
    }
    s.encrypt = *e == "1";
  }
  if (auto path = env("CHORUS_AUTH_KEY_FILE")) s.keyFile = *path;
  if (auto path = env("CHORUS_ETCD_CA")) s.etcdCaFile = *path;
  if (auto path = env("CHORUS_ETCD_CERT")) s.etcdCertFile = *path;
  if (auto path = env("CHORUS_ETCD_KEY")) s.etcdKeyFile = *path;
  return s;
}

TcpOptions TcpOptions::fromEnv() {
  TcpOptions s;
  if (auto v = env("CHORUS_TCP_ZEROCOPY_BYTES")) {
    s.zeroCopyBytes = static_cast<size_t>(number("CHORUS_TCP_ZEROCOPY_BYTES", *v, 0, 1LL << 40));
  }
  if (auto v = env("CHORUS_TCP_ZEROCOPY_KEEP")) {
    s.zeroCopyKeep = number("CHORUS_TCP_ZEROCOPY_KEEP", *v, 0, 1) == 1;
  }
  return s;
}

StoreLimits StoreLimits::fromEnv() {
  StoreLimits l;
  l.maxKeyBytes = static_cast<size_t>(
      numberOr("CHORUS_STORE_MAX_KEY", static_cast<long long>(l.maxKeyBytes), 1, 1 << 20));
  l.maxValueBytes = static_cast<size_t>(numberOr(
      "CHORUS_STORE_MAX_VALUE", static_cast<long long>(l.maxValueBytes), 0, kMaxStoreValue));
  l.maxConnections = static_cast<size_t>(numberOr(
      "CHORUS_STORE_MAX_CONNECTIONS", static_cast<long long>(l.maxConnections), 1, 1 << 20));
  l.frameTimeout = std::chrono::seconds(
      numberOr("CHORUS_STORE_FRAME_TIMEOUT", l.frameTimeout.count() / 1000, 1, 24 * 3600));
  return l;
}

Options Options::fromEnv() {
  Options o;
  if (auto v = env("CHORUS_TIMEOUT")) {
    o.timeout = std::chrono::milliseconds(
        static_cast<long long>(parseSeconds("CHORUS_TIMEOUT", *v) * 1000.0));
  }
  if (auto v = env("CHORUS_IFNAME")) o.ifname = *v;
  if (auto v = env("CHORUS_ALGO")) o.algorithm = parseAlgorithmSetting(*v);
  if (auto v = env("CHORUS_TUNING_FILE")) {
    o.tuning = Tuning::fromFile(*v);
    o.tuningFile = *v;
  }
  if (auto v = env("CHORUS_DEBUG")) o.debug = parseDebugLevel(*v);
  if (auto v = env("CHORUS_SEGMENT_BYTES")) {
    o.segmentBytes = static_cast<size_t>(number("CHORUS_SEGMENT_BYTES", *v, 64, 1LL << 30));
  }
  if (auto v = env("CHORUS_TCP_SEGMENT_BYTES")) {
    const auto n = number("CHORUS_TCP_SEGMENT_BYTES", *v, 0, 1LL << 30);
    if (n != 0 && n < 64) {
      throw Error(ErrorCode::kInvalidArgument,
                  "CHORUS_TCP_SEGMENT_BYTES='" + *v + "' is neither 0 nor in [64, 1 GiB]");
    }
    o.tcpSegmentBytes = static_cast<size_t>(n);
  }
  applyTuningOverridesFromEnv(o.tuning);
  if (auto v = env("CHORUS_SOCKET_BUFFER")) {
    o.socketBufferBytes = static_cast<int>(number("CHORUS_SOCKET_BUFFER", *v, 0, 1LL << 30));
  }
  if (auto v = env("CHORUS_SPIN_US")) {
    o.spinMicros = static_cast<int>(number("CHORUS_SPIN_US", *v, -1, 1000000));
  }
  if (auto v = env("CHORUS_TRANSPORT")) o.transport = parseTransportKind(*v);
  if (auto v = env("CHORUS_HOST_ID")) o.hostId = *v;
  if (auto v = env("CHORUS_SHM_RING_BYTES")) {
    o.shmRingBytes = static_cast<size_t>(number("CHORUS_SHM_RING_BYTES", *v, 4096, 1LL << 30));
  }
  if (auto v = env("CHORUS_SHM_SINGLE_COPY_BYTES")) {
    o.shmSingleCopyBytes =
        static_cast<size_t>(number("CHORUS_SHM_SINGLE_COPY_BYTES", *v, 0, 1LL << 40));
  }
  o.trace = TraceOptions::fromEnv();
  o.auth = AuthOptions::fromEnv();
  o.tcp = TcpOptions::fromEnv();
  o.storeLimits = StoreLimits::fromEnv();
  return o;
}

}  // namespace chorus
