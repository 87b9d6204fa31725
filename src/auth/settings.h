// Whether connections authenticate, and with which key: CHORUS_AUTH and CHORUS_AUTH_KEY_FILE.
#pragma once

#include "auth/job_key.h"

#include <chrono>
#include <optional>
#include <string>

namespace chorus::auth {

enum class AuthMode {
  kAuto,      // authenticate when a key is set (the default)
  kOff,       // never, even with a key
  kRequired,  // refuse to run without a key
};

struct AuthSettings {
  AuthMode mode = AuthMode::kAuto;
  std::optional<JobKey> key;  // set when connections authenticate
  std::string keyPath;        // where the key came from, for messages
  // How long an accepted connection may take to complete the handshake (and, at a rank's
  // listener, its hello) before it is dropped: CHORUS_HANDSHAKE_TIMEOUT seconds.
  std::chrono::milliseconds handshakeTime{10'000};
  // CHORUS_ENCRYPT=1: every TCP connection between ranks carries AES-256-GCM records
  // (auth/record_cipher.h) after the handshake; needs a key.
  bool encrypt = false;

  bool enabled() const { return key.has_value(); }
  // Throws Error(kInvalidArgument) when the mode is `required`, or encryption is on, and there
  // is no key; `what` names the operation ("creating a communicator").
  void requireKeyIfAsked(const std::string& what) const;
  // " (key file <path>, fingerprint <fp>)" for messages about a refused key.
  std::string describeKey() const;
};

// Reads CHORUS_AUTH (auto, off, required; anything else is an error naming the variable) and,
// unless the mode is off, loads CHORUS_AUTH_KEY_FILE (loadKeyFile's checks apply); and
// CHORUS_HANDSHAKE_TIMEOUT (1 .. 3600 seconds); CHORUS_ENCRYPT (0 or 1).
AuthSettings authSettingsFromEnv();

}  // namespace chorus::auth
