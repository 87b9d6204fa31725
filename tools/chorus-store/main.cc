// chorus-store: runs a Chorus TCP store server in the foreground until SIGINT or SIGTERM.
//
//   chorus-store [--host H] [--port P] [--key-file F] [--version]
//
// Defaults: --host 0.0.0.0 (every interface), --port 29500; --port 0 picks a free port.
// --key-file (or CHORUS_AUTH_KEY_FILE) makes every client prove the job's key (docs/security.md).
// Prints "chorus-store listening on tcp://H:P" once the server accepts connections.
#include "auth/settings.h"
#include "common/errno_text.h"
#include "common/tool_version.h"

#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include <signal.h>
#include <stdlib.h>

#include <cstdio>
#include <string>

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: chorus-store [--host H] [--port P] [--key-file F]\n"
               "Runs a Chorus TCP store server until interrupted (SIGINT/SIGTERM).\n"
               "  --host H   address or hostname to bind (default 0.0.0.0: every interface)\n"
               "  --port P   TCP port (default 29500; 0 picks a free port)\n"
               "  --key-file F  clients must prove this job key (mode 0600; default:\n"
               "             $CHORUS_AUTH_KEY_FILE; none: clients are not authenticated)\n"
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

}  // namespace

int main(int argc, char** argv) {
  std::string host = "0.0.0.0";
  int port = 29500;
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
    if (arg != "--host" && arg != "--port" && arg != "--key-file") {
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
      // The server reads its key where every Chorus process does.
      ::setenv("CHORUS_AUTH_KEY_FILE", value.c_str(), 1);
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
    chorus::TcpStoreServer server(host, port);
    std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    std::printf("chorus-store listening on tcp://%s:%d\n", shown.c_str(), server.port());
    std::fflush(stdout);
    const auto auth = chorus::auth::authSettingsFromEnv();
    if (auth.key) {
      std::fprintf(stderr, "chorus-store: clients must prove the key%s\n",
                   auth.describeKey().c_str());
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
