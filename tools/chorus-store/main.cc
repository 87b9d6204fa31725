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

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

namespace {

struct Args {
  std::string host = "0.0.0.0";
  int port = 29500;
  std::optional<std::string> keyFile;  // unset: $CHORUS_AUTH_KEY_FILE, if set
  // Unset: the environment's (StoreLimits::fromEnv), else the built-in defaults.
  std::optional<size_t> maxKey, maxValue, maxConnections;
  std::optional<int> frameTimeoutSeconds;
};

// Returns the arguments, or sets exitCode (0 for --help and --version, 2 for a usage error).
std::optional<Args> parseArgs(int argc, char** argv, int& exitCode) {
  Args args;
  CLI::App app{"Runs a Chorus TCP store server until interrupted (SIGINT/SIGTERM).",
               "chorus-store"};
  app.set_version_flag("--version", chorus::tools::versionText("chorus-store"));
  app.add_option("--host", args.host, "Address or hostname to bind (0.0.0.0: every interface)")
      ->capture_default_str();
  app.add_option("--port", args.port, "TCP port (0 picks a free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--key-file", args.keyFile,
                 "Clients must prove this job key (mode 0600; default: $CHORUS_AUTH_KEY_FILE; "
                 "none: clients are not authenticated)");
  app.add_option("--max-key", args.maxKey,
                 "Longest key in bytes (default $CHORUS_STORE_MAX_KEY, else 4096)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-value", args.maxValue,
                 "Largest value in bytes (default $CHORUS_STORE_MAX_VALUE, else 67108848)")
      ->check(CLI::Range(0LL, (64LL << 20) - 16));
  app.add_option("--max-connections", args.maxConnections,
                 "Open client connections (default $CHORUS_STORE_MAX_CONNECTIONS, else 1024)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--frame-timeout", args.frameTimeoutSeconds,
                 "Seconds a begun request may take to arrive (default "
                 "$CHORUS_STORE_FRAME_TIMEOUT, else 60)")
      ->check(CLI::Range(1, 24 * 3600));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    exitCode = 0;
    return std::nullopt;
  } catch (const CLI::CallForVersion& v) {
    std::cout << v.what() << "\n";
    exitCode = 0;
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    std::cerr << "chorus-store: " << e.what() << "\n" << app.help();
    exitCode = 2;
    return std::nullopt;
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  int exitCode = 0;
  const auto args = parseArgs(argc, argv, exitCode);
  if (!args) return exitCode;
  const std::string& host = args->host;

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
    if (args->keyFile) auth.keyFile = *args->keyFile;
    if (args->maxKey) limits.maxKeyBytes = *args->maxKey;
    if (args->maxValue) limits.maxValueBytes = *args->maxValue;
    if (args->maxConnections) limits.maxConnections = *args->maxConnections;
    if (args->frameTimeoutSeconds) {
      limits.frameTimeout = std::chrono::seconds(*args->frameTimeoutSeconds);
    }
    chorus::TcpStoreServer server(host, args->port, auth, limits);
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
