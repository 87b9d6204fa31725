// chorus-store: runs a Chorus TCP store server in the foreground until SIGINT or SIGTERM.
//
//   chorus-store [--host H] [--port P] [--key-file F] [--max-key B] [--max-value B]
//                [--max-connections N] [--frame-timeout S] [--version]
//
// Defaults: --host 0.0.0.0 (every interface), --port 29500; --port 0 picks a free port.
// --key-file (or CHORUS_AUTH_KEY_FILE) makes every client prove the job's key (docs/security.md).
// The server's settings are read from the environment here, once (AuthOptions::fromEnv,
// StoreLimits::fromEnv: CHORUS_AUTH*, CHORUS_HANDSHAKE_TIMEOUT, CHORUS_STORE_MAX_*, ...), the
// flags override them, and the server gets them as arguments.
// Prints "chorus-store listening on tcp://H:P" once the server accepts connections.
#include "auth/settings.h"
#include "common/errno_text.h"
#include "common/tool_version.h"

#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: chorus-store [--host H] [--port P] [--key-file F] [--max-key B]\n"
               "                    [--max-value B] [--max-connections N] [--frame-timeout S]\n"
               "Runs a Chorus TCP store server until interrupted (SIGINT/SIGTERM).\n"
               "  --host H   address or hostname to bind (default 0.0.0.0: every interface)\n"
               "  --port P   TCP port (default 29500; 0 picks a free port)\n"
               "  --key-file F  clients must prove this job key (mode 0600; default:\n"
               "             $CHORUS_AUTH_KEY_FILE; none: clients are not authenticated)\n"
               "  --max-key B  longest key in bytes, 1..1048576 (default $CHORUS_STORE_MAX_KEY,\n"
               "             else 4096)\n"
               "  --max-value B  largest value in bytes, 0..67108848 (default\n"
               "             $CHORUS_STORE_MAX_VALUE, else 67108848)\n"
               "  --max-connections N  open client connections, 1..1048576 (default\n"
               "             $CHORUS_STORE_MAX_CONNECTIONS, else 1024)\n"
               "  --frame-timeout S  seconds a begun request may take to arrive, 1..86400\n"
               "             (default $CHORUS_STORE_FRAME_TIMEOUT, else 60)\n"
               "  --version  print the version and exit\n");
}

bool parsePort(const std::string& s, int* port) {
  if (s.empty() || s.size() > 5) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > 65535) return false;
  *port = v;
  return true;
}

// A whole decimal number in [lo, hi].
bool parseNumber(const std::string& s, long long lo, long long hi, long long* out) {
  if (s.empty() || s.size() > 18) return false;
  long long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

struct LimitFlag {
  const char* name;
  long long lo, hi;
  void (*set)(chorus::StoreLimits&, long long);
};

const LimitFlag kLimitFlags[] = {
    {"--max-key", 1, 1 << 20,
     [](chorus::StoreLimits& l, long long v) { l.maxKeyBytes = static_cast<size_t>(v); }},
    {"--max-value", 0, (64LL << 20) - 16,
     [](chorus::StoreLimits& l, long long v) { l.maxValueBytes = static_cast<size_t>(v); }},
    {"--max-connections", 1, 1 << 20,
     [](chorus::StoreLimits& l, long long v) { l.maxConnections = static_cast<size_t>(v); }},
    {"--frame-timeout", 1, 24 * 3600,
     [](chorus::StoreLimits& l, long long v) { l.frameTimeout = std::chrono::seconds(v); }},
};

const LimitFlag* limitFlag(const std::string& arg) {
  for (const LimitFlag& f : kLimitFlags) {
    if (arg == f.name) return &f;
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "0.0.0.0";
  int port = 29500;
  std::optional<std::string> keyFile;
  std::vector<std::pair<const LimitFlag*, long long>> limitFlags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    }
    if (arg == "--version") {
      std::printf("%s\n", chorus::tools::versionText("chorus-store").c_str());
      return 0;
    }
    const LimitFlag* limit = limitFlag(arg);
    if (arg != "--host" && arg != "--port" && arg != "--key-file" && limit == nullptr) {
      std::fprintf(stderr, "chorus-store: unknown argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "chorus-store: %s needs a value\n", arg.c_str());
        return 2;
      }
      value = argv[++i];
    }
    if (arg == "--host") {
      host = value;
    } else if (arg == "--key-file") {
      keyFile = value;
    } else if (limit != nullptr) {
      long long v = 0;
      if (!parseNumber(value, limit->lo, limit->hi, &v)) {
        std::fprintf(stderr, "chorus-store: bad %s '%s' (expected %lld-%lld)\n", limit->name,
                     value.c_str(), limit->lo, limit->hi);
        return 2;
      }
      limitFlags.emplace_back(limit, v);
    } else if (!parsePort(value, &port)) {
      std::fprintf(stderr, "chorus-store: bad port '%s' (expected 0-65535)\n", value.c_str());
      return 2;
    }
  }

  // Block the signals before the server thread starts so that only sigwait() below sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  if (int rc = pthread_sigmask(SIG_BLOCK, &signals, nullptr); rc != 0) {
    std::fprintf(stderr, "chorus-store: pthread_sigmask: %s\n", chorus::errnoText(rc).c_str());
    return 1;
  }

  try {
    // The environment's settings, read here only, with the flags on top.
    chorus::AuthOptions auth = chorus::AuthOptions::fromEnv();
    chorus::StoreLimits limits = chorus::StoreLimits::fromEnv();
    if (keyFile) auth.keyFile = *keyFile;
    for (const auto& [flag, v] : limitFlags) flag->set(limits, v);
    chorus::TcpStoreServer server(host, port, auth, limits);
    std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    std::printf("chorus-store listening on tcp://%s:%d\n", shown.c_str(), server.port());
    std::fflush(stdout);
    const auto settings = chorus::auth::authSettingsFrom(auth);
    if (settings.key) {
      std::fprintf(stderr, "chorus-store: clients must prove the key%s\n",
                   settings.describeKey().c_str());
    } else {
      std::fprintf(stderr,
                   "chorus-store: no key: any client that reaches this port can read and change "
                   "the store (--key-file)\n");
    }
    int sig = 0;
    while (sigwait(&signals, &sig) != 0) {
    }
    std::fprintf(stderr, "chorus-store: got %s, shutting down\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM");
  } catch (const chorus::Error& e) {
    std::fprintf(stderr, "chorus-store: %s\n", e.what());
    return 1;
  }
  return 0;
}
