// Whether connections authenticate, and with which key: chorus::AuthOptions (Options::auth, read
// from CHORUS_AUTH, CHORUS_AUTH_KEY_FILE, ... by Options::fromEnv) with its key file loaded.
#pragma once

#include "auth/job_key.h"

#include <chorus/options.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace chorus::auth {

using AuthMode = chorus::AuthMode;

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

// The options with their key: unless the mode is off, loads options.keyFile when set
// (loadKeyFile's checks apply; a bad file throws Error naming it).
AuthSettings authSettingsFrom(const AuthOptions& options);

}  // namespace chorus::auth
