// The only place that reads the CHORUS_* settings and the launchers' rank variables (launch_env.h).
#include <chorus/error.hpp>
#include <chorus/options.hpp>

#include "core/c_options.h"
#include "core/launch_env.h"

#include <cstdlib>
#include <optional>
#include <string>

namespace chorus {
namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

long long parseNumber(const char* name, const std::string& text, long long lo, long long hi) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used, 10);
  } catch (...) {
    used = 0;
  }
  if (used != text.size() || v < lo || v > hi) {
    throw Error(ErrorCode::kInvalidArgument, std::string(name) + "='" + text +
                                                 "' is not a number in [" + std::to_string(lo) +
                                                 ", " + std::to_string(hi) + "]");
  }
  return v;
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

bool launchedAlone() {
  for (const char* v :
       {"CHORUS_RANK", "CHORUS_WORLD_SIZE", "CHORUS_STORE", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"}) {
    if (env(v)) return false;
  }
  return true;
}

LaunchEnv readLaunchEnv() {
  LaunchEnv e;
  struct Source {
    const char* rank;
    const char* size;
  };
  const Source sources[] = {{"CHORUS_RANK", "CHORUS_WORLD_SIZE"},
                            {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"PMI_RANK", "PMI_SIZE"},
                            {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const auto& s : sources) {
    auto r = env(s.rank);
    auto n = env(s.size);
    if (!r && !n) continue;
    if (!r || !n) {
      throw Error(ErrorCode::kInvalidArgument, std::string(r ? s.size : s.rank) +
                                                   " is not set although " + (r ? s.rank : s.size) +
                                                   " is");
    }
    e.size = static_cast<int>(parseNumber(s.size, *n, 1, 1 << 24));
    e.rank = static_cast<int>(parseNumber(s.rank, *r, 0, e.size - 1));
    e.source = std::string(s.rank) + "/" + s.size;
    break;
  }
  if (e.rank < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "no rank in the environment: set CHORUS_RANK and CHORUS_WORLD_SIZE, or start the "
                "program with chorus-run, mpirun or srun");
  }
  auto store = env("CHORUS_STORE");
  if (!store) {
    throw Error(ErrorCode::kInvalidArgument,
                "CHORUS_STORE is not set (for example tcp://<host of rank 0>:29500)");
  }
  e.store = *store;
  return e;
}

}  // namespace chorus
