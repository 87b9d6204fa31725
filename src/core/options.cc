// Options::fromEnv: the CHORUS_* settings (launch_env.cc reads the launchers' variables).
#include <chorus/error.hpp>
#include <chorus/options.hpp>

#include "common/env_vars.h"
#include "core/c_options.h"

#include <cstdlib>
#include <optional>
#include <string>

namespace chorus {
namespace {

std::optional<std::string> env(const char* name) { return envVar(name); }

long long parseNumber(const char* name, const std::string& text, long long lo, long long hi) {
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

}  // namespace

std::string_view toString(TransportKind kind) {
  switch (kind) {
    case TransportKind::kAuto:
      return "auto";
    case TransportKind::kTcp:
      return "tcp";
    case TransportKind::kShm:
      return "shm";
  }
  return "?";
}

std::string_view toString(DebugLevel level) {
  switch (level) {
    case DebugLevel::kOff:
      return "0";
    case DebugLevel::kRank0:
      return "1";
    case DebugLevel::kAll:
      return "all";
  }
  return "?";
}

TransportKind parseTransportKind(std::string_view text) {
  for (TransportKind k : {TransportKind::kAuto, TransportKind::kTcp, TransportKind::kShm}) {
    if (text == toString(k)) return k;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "CHORUS_TRANSPORT='" + std::string(text) + "': expected auto, tcp or shm");
}

DebugLevel parseDebugLevel(std::string_view text) {
  for (DebugLevel d : {DebugLevel::kOff, DebugLevel::kRank0, DebugLevel::kAll}) {
    if (text == toString(d)) return d;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "CHORUS_DEBUG='" + std::string(text) + "': expected 0, 1 or all");
}

void applyTuningOverridesFromEnv(Tuning& tuning) {
  if (auto v = env("CHORUS_RING_BIDIR_BYTES")) {
    tuning.ringBidirectionalBytes =
        static_cast<double>(parseNumber("CHORUS_RING_BIDIR_BYTES", *v, 0, 1LL << 50));
  }
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
    o.segmentBytes = static_cast<size_t>(parseNumber("CHORUS_SEGMENT_BYTES", *v, 64, 1LL << 30));
  }
  if (auto v = env("CHORUS_TCP_SEGMENT_BYTES")) {
    const auto n = parseNumber("CHORUS_TCP_SEGMENT_BYTES", *v, 0, 1LL << 30);
    if (n != 0 && n < 64) {
      throw Error(ErrorCode::kInvalidArgument,
                  "CHORUS_TCP_SEGMENT_BYTES='" + *v + "' is neither 0 nor in [64, 1 GiB]");
    }
    o.tcpSegmentBytes = static_cast<size_t>(n);
  }
  applyTuningOverridesFromEnv(o.tuning);
  if (auto v = env("CHORUS_SOCKET_BUFFER")) {
    o.socketBufferBytes = static_cast<int>(parseNumber("CHORUS_SOCKET_BUFFER", *v, 0, 1LL << 30));
  }
  if (auto v = env("CHORUS_SPIN_US")) {
    o.spinMicros = static_cast<int>(parseNumber("CHORUS_SPIN_US", *v, -1, 1000000));
  }
  if (auto v = env("CHORUS_TRANSPORT")) o.transport = parseTransportKind(*v);
  if (auto v = env("CHORUS_HOST_ID")) o.hostId = *v;
  if (auto v = env("CHORUS_SHM_RING_BYTES")) {
    o.shmRingBytes = static_cast<size_t>(parseNumber("CHORUS_SHM_RING_BYTES", *v, 4096, 1LL << 30));
  }
  if (auto v = env("CHORUS_SHM_SINGLE_COPY_BYTES")) {
    o.shmSingleCopyBytes =
        static_cast<size_t>(parseNumber("CHORUS_SHM_SINGLE_COPY_BYTES", *v, 0, 1LL << 40));
  }
  return o;
}

}  // namespace chorus
