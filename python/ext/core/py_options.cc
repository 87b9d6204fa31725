// chorus.Options: chorus::Options from Python, one attribute per setting (docs/config.md names
// each attribute's CHORUS_* variable). Options() holds the defaults, Options.from_env() the
// environment's values; keywords set attributes in both.
#include "py_options.h"

#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace py = pybind11;
using namespace pybind11::literals;

namespace chorus::python {

namespace {

struct Field {
  const char* name;
  std::function<py::object(const Options&)> get;
  std::function<void(Options&, py::handle)> set;
  const char* doc;
};

std::chrono::milliseconds secondsArg(py::handle v, const char* name, double lo, double hi) {
  const double s = v.cast<double>();
  if (!(s >= lo) || s > hi) {
    throw py::value_error(std::string(name) + " " + std::to_string(s) + " is not in [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "] seconds");
  }
  return std::chrono::milliseconds(static_cast<long long>(std::llround(s * 1000.0)));
}

size_t bytesArg(py::handle v, const char* name, long long lo, long long hi) {
  const long long n = v.cast<long long>();
  if (n < lo || n > hi) {
    throw py::value_error(std::string(name) + " " + std::to_string(n) + " is not in [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return static_cast<size_t>(n);
}

std::string authModeName(AuthMode m) {
  switch (m) {
    case AuthMode::kAuto:
      return "auto";
    case AuthMode::kOff:
      return "off";
    case AuthMode::kRequired:
      return "required";
  }
  return "?";
}

AuthMode authModeArg(py::handle v) {
  const auto text = v.cast<std::string>();
  for (AuthMode m : {AuthMode::kAuto, AuthMode::kOff, AuthMode::kRequired}) {
    if (text == authModeName(m)) return m;
  }
  throw py::value_error("auth '" + text + "' is not one of auto, off, required");
}

template <class T>
py::object obj(T v) {
  return py::cast(std::move(v));
}

// The ranges are those of the variables (common/options_env.cc), so that a value refused from
// the environment is refused here too.
const std::vector<Field>& fields() {
  static const std::vector<Field> all = {
      {"timeout", [](const Options& o) { return obj(o.timeout.count() / 1000.0); },
       [](Options& o, py::handle v) { o.timeout = secondsArg(v, "timeout", 0.001, 1e7); },
       "seconds (CHORUS_TIMEOUT)"},
      {"algorithm", [](const Options& o) { return obj(toString(o.algorithm)); },
       [](Options& o, py::handle v) { o.algorithm = parseAlgorithmSetting(v.cast<std::string>()); },
       "as CHORUS_ALGO: 'auto', 'ring', 'allreduce=tree,broadcast=chain', ..."},
      {"transport", [](const Options& o) { return obj(std::string(toString(o.transport))); },
       [](Options& o, py::handle v) { o.transport = parseTransportKind(v.cast<std::string>()); },
       "'auto', 'tcp' or 'shm' (CHORUS_TRANSPORT)"},
      {"debug", [](const Options& o) { return obj(std::string(toString(o.debug))); },
       [](Options& o, py::handle v) { o.debug = parseDebugLevel(v.cast<std::string>()); },
       "'0', '1' or 'all' (CHORUS_DEBUG)"},
      {"ifname", [](const Options& o) { return obj(o.ifname); },
       [](Options& o, py::handle v) { o.ifname = v.cast<std::string>(); }, "CHORUS_IFNAME"},
      {"host_id", [](const Options& o) { return obj(o.hostId); },
       [](Options& o, py::handle v) { o.hostId = v.cast<std::string>(); }, "CHORUS_HOST_ID"},
      {"segment_bytes", [](const Options& o) { return obj(o.segmentBytes); },
       [](Options& o, py::handle v) { o.segmentBytes = bytesArg(v, "segment_bytes", 64, 1 << 30); },
       "CHORUS_SEGMENT_BYTES"},
      {"shm_ring_bytes", [](const Options& o) { return obj(o.shmRingBytes); },
       [](Options& o, py::handle v) {
         o.shmRingBytes = bytesArg(v, "shm_ring_bytes", 4096, 1 << 30);
       },
       "CHORUS_SHM_RING_BYTES"},
      {"tcp_segment_bytes", [](const Options& o) { return obj(o.tcpSegmentBytes); },
       [](Options& o, py::handle v) {
         o.tcpSegmentBytes = bytesArg(v, "tcp_segment_bytes", 0, 1 << 30);
         if (o.tcpSegmentBytes != 0 && o.tcpSegmentBytes < 64) {
           throw py::value_error("tcp_segment_bytes is neither 0 nor in [64, 1 GiB]");
         }
       },
       "CHORUS_TCP_SEGMENT_BYTES; 0: segment_bytes everywhere"},
      {"socket_buffer_bytes", [](const Options& o) { return obj(o.socketBufferBytes); },
       [](Options& o, py::handle v) {
         o.socketBufferBytes = static_cast<int>(bytesArg(v, "socket_buffer_bytes", 0, 1 << 30));
       },
       "CHORUS_SOCKET_BUFFER; 0: the kernel's"},
      {"spin_us", [](const Options& o) { return obj(o.spinMicros); },
       [](Options& o, py::handle v) {
         const long long n = v.cast<long long>();
         if (n < -1 || n > 1000000) throw py::value_error("spin_us is not in [-1, 1000000]");
         o.spinMicros = static_cast<int>(n);
       },
       "CHORUS_SPIN_US; -1: automatic"},
      {"shm_single_copy_bytes", [](const Options& o) { return obj(o.shmSingleCopyBytes); },
       [](Options& o, py::handle v) {
         o.shmSingleCopyBytes = bytesArg(v, "shm_single_copy_bytes", 0, 1LL << 40);
       },
       "CHORUS_SHM_SINGLE_COPY_BYTES; 0: never"},
      {"trace_entries", [](const Options& o) { return obj(o.trace.entries); },
       [](Options& o, py::handle v) { o.trace.entries = bytesArg(v, "trace_entries", 0, 1 << 24); },
       "calls the flight recorder remembers; 0: off (CHORUS_TRACE_ENTRIES)"},
      {"trace_dir", [](const Options& o) { return obj(o.trace.dir); },
       [](Options& o, py::handle v) { o.trace.dir = v.cast<std::string>(); },
       "where a failed call's dump goes; '': none (CHORUS_TRACE_DIR)"},
      {"progress_seconds", [](const Options& o) { return obj(o.trace.progressSeconds); },
       [](Options& o, py::handle v) {
         o.trace.progressSeconds = secondsArg(v, "progress_seconds", 0, 86400).count() / 1000.0;
       },
       "period of the progress records; 0: none (CHORUS_PROGRESS_SECONDS)"},
      {"heartbeat_seconds", [](const Options& o) { return obj(o.trace.heartbeatSeconds); },
       [](Options& o, py::handle v) {
         o.trace.heartbeatSeconds = secondsArg(v, "heartbeat_seconds", 0, 86400).count() / 1000.0;
       },
       "a peer silent this long while a call waits is declared dead; 0: off "
       "(CHORUS_HEARTBEAT_SECONDS)"},
      {"report", [](const Options& o) { return obj(o.trace.report); },
       [](Options& o, py::handle v) { o.trace.report = v.cast<bool>(); }, "CHORUS_REPORT"},
      {"trace_detail_us", [](const Options& o) { return obj(o.trace.detailMicros); },
       [](Options& o, py::handle v) {
         o.trace.detailMicros = static_cast<double>(bytesArg(v, "trace_detail_us", 0, 60'000'000));
       },
       "CHORUS_TRACE_DETAIL_US"},
      {"auth", [](const Options& o) { return obj(authModeName(o.auth.mode)); },
       [](Options& o, py::handle v) { o.auth.mode = authModeArg(v); },
       "'auto', 'off' or 'required' (CHORUS_AUTH)"},
      {"auth_key_file", [](const Options& o) { return obj(o.auth.keyFile); },
       [](Options& o, py::handle v) { o.auth.keyFile = v.cast<std::string>(); },
       "the job key file; '': none (CHORUS_AUTH_KEY_FILE)"},
      {"encrypt", [](const Options& o) { return obj(o.auth.encrypt); },
       [](Options& o, py::handle v) { o.auth.encrypt = v.cast<bool>(); }, "CHORUS_ENCRYPT"},
      {"handshake_timeout",
       [](const Options& o) { return obj(o.auth.handshakeTimeout.count() / 1000.0); },
       [](Options& o, py::handle v) {
         o.auth.handshakeTimeout = secondsArg(v, "handshake_timeout", 0.001, 3600);
       },
       "seconds (CHORUS_HANDSHAKE_TIMEOUT)"},
      {"tcp_zerocopy_bytes", [](const Options& o) { return obj(o.tcp.zeroCopyBytes); },
       [](Options& o, py::handle v) {
         o.tcp.zeroCopyBytes = bytesArg(v, "tcp_zerocopy_bytes", 0, 1LL << 40);
       },
       "MSG_ZEROCOPY sends from this size; 0: never (CHORUS_TCP_ZEROCOPY_BYTES)"},
      {"tcp_zerocopy_keep", [](const Options& o) { return obj(o.tcp.zeroCopyKeep); },
       [](Options& o, py::handle v) { o.tcp.zeroCopyKeep = v.cast<bool>(); },
       "CHORUS_TCP_ZEROCOPY_KEEP"},
      {"store_max_key", [](const Options& o) { return obj(o.storeLimits.maxKeyBytes); },
       [](Options& o, py::handle v) {
         o.storeLimits.maxKeyBytes = bytesArg(v, "store_max_key", 1, 1 << 20);
       },
       "the store rank 0 hosts: CHORUS_STORE_MAX_KEY"},
      {"store_max_value", [](const Options& o) { return obj(o.storeLimits.maxValueBytes); },
       [](Options& o, py::handle v) {
         o.storeLimits.maxValueBytes = bytesArg(v, "store_max_value", 0, (64LL << 20) - 16);
       },
       "the store rank 0 hosts: CHORUS_STORE_MAX_VALUE"},
      {"store_max_connections", [](const Options& o) { return obj(o.storeLimits.maxConnections); },
       [](Options& o, py::handle v) {
         o.storeLimits.maxConnections = bytesArg(v, "store_max_connections", 1, 1 << 20);
       },
       "the store rank 0 hosts: CHORUS_STORE_MAX_CONNECTIONS"},
      {"store_frame_timeout",
       [](const Options& o) { return obj(o.storeLimits.frameTimeout.count() / 1000.0); },
       [](Options& o, py::handle v) {
         o.storeLimits.frameTimeout = secondsArg(v, "store_frame_timeout", 1, 86400);
       },
       "the store rank 0 hosts: CHORUS_STORE_FRAME_TIMEOUT (seconds)"},
  };
  return all;
}

void apply(Options& o, const py::kwargs& kw) {
  for (auto [key, value] : kw) {
    const auto name = key.cast<std::string>();
    bool known = false;
    for (const Field& f : fields()) {
      if (name == f.name) {
        f.set(o, value);
        known = true;
        break;
      }
    }
    if (!known) throw py::type_error("chorus.Options has no setting '" + name + "'");
  }
}

}  // namespace

void registerOptions(py::module_& m) {
  auto cls = py::class_<Options>(m, "Options", R"doc(
The communicator's settings, one attribute per setting (docs/config.md names each one's
CHORUS_* variable). ``Options(**settings)`` starts from the defaults,
``Options.from_env(**settings)`` from the CHORUS_* variables; keywords set attributes. Pass it as ``options=`` to
``Communicator(...)`` or ``Communicator.from_env(...)``.)doc");
  cls.def(py::init([](const py::kwargs& kw) {
            Options o;
            apply(o, kw);
            return o;
          }),
          "The defaults, with the settings given as keywords.")
      .def_static(
          "from_env",
          [](const py::kwargs& kw) {
            Options o = Options::fromEnv();
            apply(o, kw);
            return o;
          },
          "The CHORUS_* variables' values (raises chorus.Error naming a malformed one), with the "
          "settings given as keywords on top.")
      .def("__repr__", [](const Options& o) {
        std::string out = "chorus.Options(";
        for (const Field& f : fields()) {
          if (out.back() != '(') out += ", ";
          out += std::string(f.name) + "=" + py::repr(f.get(o)).cast<std::string>();
        }
        return out + ")";
      });
  for (const Field& f : fields()) {
    cls.def_property(
        f.name, [get = f.get](const Options& o) { return get(o); },
        [set = f.set](Options& o, py::handle v) { set(o, v); }, f.doc);
  }
}

}  // namespace chorus::python
