#include "core/c_options.h"

#include "common/options_env.h"
#include "core/c_enum.h"

#include <chorus/error.hpp>

#include <csignal>
#include <cstddef>
#include <cstring>
#include <string>

namespace chorus {

namespace {

// The first version of chorus_options ended after shm_ring_bytes; a caller compiled against it
// passes that size forever, a newer caller a larger one.
constexpr size_t kFirstVersionSize = offsetof(chorus_options, shm_ring_bytes) + sizeof(size_t);

// The largest value the CHORUS_* byte-size variables accept.
constexpr size_t kMaxBytes = size_t{1} << 30;

[[noreturn]] void bad(const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "chorus_options: " + what);
}

// The fields added in 0.2 (zero: not set; a sentinel where zero is a value of its own).
void readLaterFields(const chorus_options& v, Options& o) {
  if (v.tcp_segment_bytes == CHORUS_TCP_SEGMENT_AS_SEGMENT) {
    o.tcpSegmentBytes = 0;
  } else if (v.tcp_segment_bytes != 0) {
    if (v.tcp_segment_bytes < 64 || v.tcp_segment_bytes > kMaxBytes) {
      bad("tcp_segment_bytes " + std::to_string(v.tcp_segment_bytes) +
          " is not in [64, 1 GiB] (CHORUS_TCP_SEGMENT_AS_SEGMENT uses segment_bytes)");
    }
    o.tcpSegmentBytes = v.tcp_segment_bytes;
  }
  if (v.spin_us == CHORUS_SPIN_NONE) {
    o.spinMicros = 0;
  } else if (v.spin_us < 0 || v.spin_us > 1000000) {
    bad("spin_us " + std::to_string(v.spin_us) +
        " is not in [1, 1000000] (CHORUS_SPIN_NONE sleeps at once)");
  } else if (v.spin_us > 0) {
    o.spinMicros = v.spin_us;
  }
  if (v.shm_single_copy_bytes == CHORUS_SHM_SINGLE_COPY_NEVER) {
    o.shmSingleCopyBytes = 0;
  } else if (v.shm_single_copy_bytes != 0) {
    o.shmSingleCopyBytes = v.shm_single_copy_bytes;
  }
}

// The fields added in 0.3: the flight recorder, authentication and the TCP links.
void readTraceAuthTcpFields(const chorus_options& v, Options& o) {
  if (v.trace_entries == CHORUS_TRACE_OFF) {
    o.trace.entries = 0;
  } else if (v.trace_entries < 0 || v.trace_entries > (1LL << 24)) {
    bad("trace_entries " + std::to_string(v.trace_entries) +
        " is not in [1, 16777216] (CHORUS_TRACE_OFF turns the recorder off)");
  } else if (v.trace_entries > 0) {
    o.trace.entries = static_cast<size_t>(v.trace_entries);
  }
  if (v.trace_dir != nullptr) o.trace.dir = v.trace_dir;
  if (v.progress_seconds == CHORUS_PROGRESS_NEVER) {
    o.trace.progressSeconds = 0;
  } else if (!(v.progress_seconds >= 0) || v.progress_seconds > 86400) {
    bad("progress_seconds " + std::to_string(v.progress_seconds) +
        " is not in (0, 86400] (CHORUS_PROGRESS_NEVER: no progress records)");
  } else if (v.progress_seconds > 0) {
    o.trace.progressSeconds = v.progress_seconds;
  }
  switch (rawEnum(v.auth)) {
    case CHORUS_AUTH_DEFAULT:
      break;
    case CHORUS_AUTH_AUTO:
      o.auth.mode = AuthMode::kAuto;
      break;
    case CHORUS_AUTH_OFF:
      o.auth.mode = AuthMode::kOff;
      break;
    case CHORUS_AUTH_REQUIRED:
      o.auth.mode = AuthMode::kRequired;
      break;
    default:
      bad("auth " + std::to_string(rawEnum(v.auth)) + " is not a chorus_auth_mode");
  }
  if (v.auth_key_file != nullptr) o.auth.keyFile = v.auth_key_file;
  if (v.encrypt == CHORUS_ENCRYPT_OFF) {
    o.auth.encrypt = false;
  } else if (v.encrypt == 1) {
    o.auth.encrypt = true;
  } else if (v.encrypt != 0) {
    bad("encrypt " + std::to_string(v.encrypt) + " is not 1 or CHORUS_ENCRYPT_OFF");
  }
  if (v.handshake_timeout_ms < 0 || v.handshake_timeout_ms > 3600LL * 1000) {
    bad("handshake_timeout_ms " + std::to_string(v.handshake_timeout_ms) +
        " is not in [1, 3600000]");
  } else if (v.handshake_timeout_ms > 0) {
    o.auth.handshakeTimeout = std::chrono::milliseconds(v.handshake_timeout_ms);
  }
  if (v.tcp_zerocopy_bytes == CHORUS_TCP_ZEROCOPY_NEVER) {
    o.tcp.zeroCopyBytes = 0;
  } else if (v.tcp_zerocopy_bytes > (size_t{1} << 40)) {
    bad("tcp_zerocopy_bytes " + std::to_string(v.tcp_zerocopy_bytes) +
        " is above 1 TiB (CHORUS_TCP_ZEROCOPY_NEVER: never)");
  } else if (v.tcp_zerocopy_bytes != 0) {
    o.tcp.zeroCopyBytes = v.tcp_zerocopy_bytes;
  }
}

// A flag field: 1 on, `off` off, 0 not set.
void readFlag(int v, int off, const char* name, bool& out) {
  if (v == off) {
    out = false;
  } else if (v == 1) {
    out = true;
  } else if (v != 0) {
    bad(std::string(name) + " " + std::to_string(v) + " is not 1 or its _OFF value");
  }
}

// A number field: 0 not set, in [lo, hi] set, anything else refused.
template <class T>
bool inRange(T v, T lo, T hi, const char* name) {
  if (v == 0) return false;
  if (v < lo || v > hi) {
    bad(std::string(name) + " " + std::to_string(v) + " is not in [" + std::to_string(lo) + ", " +
        std::to_string(hi) + "]");
  }
  return true;
}

// The rest of the recorder's, the links' and the hosted store's settings (also 0.3).
void readRestFields(const chorus_options& v, Options& o) {
  switch (v.trace_signal) {
    case 0:
      break;
    case CHORUS_TRACE_SIGNAL_NONE:
      o.trace.signal = 0;
      break;
    case CHORUS_TRACE_SIGNAL_USR1:
      o.trace.signal = SIGUSR1;
      break;
    case CHORUS_TRACE_SIGNAL_USR2:
      o.trace.signal = SIGUSR2;
      break;
    default:
      bad("trace_signal " + std::to_string(v.trace_signal) + " is not a CHORUS_TRACE_SIGNAL_*");
  }
  readFlag(v.report, CHORUS_REPORT_OFF, "report", o.trace.report);
  if (v.trace_detail_us == CHORUS_TRACE_DETAIL_EVERY) {
    o.trace.detailMicros = 0;
  } else if (inRange(v.trace_detail_us, 1LL, 60'000'000LL, "trace_detail_us")) {
    o.trace.detailMicros = static_cast<double>(v.trace_detail_us);
  }
  readFlag(v.tcp_zerocopy_keep, CHORUS_TCP_ZEROCOPY_KEEP_OFF, "tcp_zerocopy_keep",
           o.tcp.zeroCopyKeep);
  if (inRange(v.store_max_key, size_t{1}, size_t{1} << 20, "store_max_key")) {
    o.storeLimits.maxKeyBytes = v.store_max_key;
  }
  if (v.store_max_value == CHORUS_STORE_MAX_VALUE_ZERO) {
    o.storeLimits.maxValueBytes = 0;
  } else if (inRange(v.store_max_value, size_t{1}, (size_t{64} << 20) - 16, "store_max_value")) {
    o.storeLimits.maxValueBytes = v.store_max_value;
  }
  if (inRange(v.store_max_connections, size_t{1}, size_t{1} << 20, "store_max_connections")) {
    o.storeLimits.maxConnections = v.store_max_connections;
  }
  if (inRange(v.store_frame_timeout_ms, 1000LL, 86'400'000LL, "store_frame_timeout_ms")) {
    o.storeLimits.frameTimeout = std::chrono::milliseconds(v.store_frame_timeout_ms);
  }
  if (v.heartbeat_seconds == CHORUS_HEARTBEAT_OFF) {
    o.trace.heartbeatSeconds = 0;
  } else if (!(v.heartbeat_seconds >= 0) || v.heartbeat_seconds > 86400) {
    bad("heartbeat_seconds " + std::to_string(v.heartbeat_seconds) +
        " is not in (0, 86400] (CHORUS_HEARTBEAT_OFF: no heartbeat)");
  } else if (v.heartbeat_seconds > 0) {
    o.trace.heartbeatSeconds = v.heartbeat_seconds;
  }
}

}  // namespace

Options optionsFromC(const chorus_options* c) {
  Options o = Options::fromEnv();
  if (c == nullptr) return o;
  if (c->struct_size < kFirstVersionSize) {
    bad("struct_size " + std::to_string(c->struct_size) + " is smaller than any version (" +
        std::to_string(kFirstVersionSize) + "): set it to sizeof(chorus_options)");
  }
  // Fields past the caller's struct_size are zero ("not set"); bytes past ours are ignored.
  chorus_options v{};
  std::memcpy(&v, c, c->struct_size < sizeof(v) ? c->struct_size : sizeof(v));

  if (v.timeout_ms < 0) bad("timeout_ms " + std::to_string(v.timeout_ms) + " is negative");
  if (v.timeout_ms > 0) o.timeout = std::chrono::milliseconds(v.timeout_ms);
  if (v.algorithm != nullptr) o.algorithm = parseAlgorithmSetting(v.algorithm);  // as CHORUS_ALGO
  switch (rawEnum(v.transport)) {
    case CHORUS_TRANSPORT_DEFAULT:
      break;
    case CHORUS_TRANSPORT_AUTO:
      o.transport = TransportKind::kAuto;
      break;
    case CHORUS_TRANSPORT_TCP:
      o.transport = TransportKind::kTcp;
      break;
    case CHORUS_TRANSPORT_SHM:
      o.transport = TransportKind::kShm;
      break;
    default:
      bad("transport " + std::to_string(rawEnum(v.transport)) + " is not a chorus_transport");
  }
  switch (rawEnum(v.debug)) {
    case CHORUS_DEBUG_DEFAULT:
      break;
    case CHORUS_DEBUG_OFF:
      o.debug = DebugLevel::kOff;
      break;
    case CHORUS_DEBUG_RANK0:
      o.debug = DebugLevel::kRank0;
      break;
    case CHORUS_DEBUG_ALL:
      o.debug = DebugLevel::kAll;
      break;
    default:
      bad("debug " + std::to_string(rawEnum(v.debug)) + " is not a chorus_debug");
  }
  if (v.segment_bytes != 0) {
    // The same range as CHORUS_SEGMENT_BYTES.
    if (v.segment_bytes < 64 || v.segment_bytes > kMaxBytes) {
      bad("segment_bytes " + std::to_string(v.segment_bytes) + " is not in [64, 1 GiB]");
    }
    o.segmentBytes = v.segment_bytes;
  }
  if (v.ifname != nullptr) o.ifname = v.ifname;
  if (v.host_id != nullptr) o.hostId = v.host_id;
  if (v.tuning_file != nullptr) {
    // CHORUS_RING_BIDIR_BYTES overrides the file's value, as it does for CHORUS_TUNING_FILE.
    o.tuning = Tuning::fromFile(v.tuning_file);
    o.tuningFile = v.tuning_file;
    applyTuningOverridesFromEnv(o.tuning);
  }
  if (v.socket_buffer_bytes == CHORUS_SOCKET_BUFFER_KERNEL_DEFAULT) {
    o.socketBufferBytes = 0;  // what CHORUS_SOCKET_BUFFER=0 asks for
  } else if (v.socket_buffer_bytes < 0 || static_cast<size_t>(v.socket_buffer_bytes) > kMaxBytes) {
    bad("socket_buffer_bytes " + std::to_string(v.socket_buffer_bytes) +
        " is not in [1, 1 GiB] (CHORUS_SOCKET_BUFFER_KERNEL_DEFAULT keeps the kernel's)");
  } else if (v.socket_buffer_bytes > 0) {
    o.socketBufferBytes = v.socket_buffer_bytes;
  }
  if (v.shm_ring_bytes != 0) {
    if (v.shm_ring_bytes < 4096 || v.shm_ring_bytes > kMaxBytes) {
      bad("shm_ring_bytes " + std::to_string(v.shm_ring_bytes) + " is not in [4096, 1 GiB]");
    }
    o.shmRingBytes = v.shm_ring_bytes;
  }
  readLaterFields(v, o);
  readTraceAuthTcpFields(v, o);
  readRestFields(v, o);
  return o;
}

}  // namespace chorus
