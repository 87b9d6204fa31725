#include "auth/settings.h"

#include "auth/key_file.h"
#include "common/env_vars.h"

#include <chorus/error.hpp>

namespace chorus::auth {

void AuthSettings::requireKeyIfAsked(const std::string& what) const {
  if (mode == AuthMode::kRequired && !key) {
    throw Error(ErrorCode::kInvalidArgument,
                what + ": CHORUS_AUTH=required, but no key is set (CHORUS_AUTH_KEY_FILE)");
  }
  if (encrypt && !key) {
    throw Error(ErrorCode::kInvalidArgument,
                what + ": CHORUS_ENCRYPT=1 needs a key (CHORUS_AUTH_KEY_FILE" +
                    (mode == AuthMode::kOff ? ", and CHORUS_AUTH other than off)" : ")") +
                    "; the encryption keys of a connection are derived from it");
  }
}

std::string AuthSettings::describeKey() const {
  if (!key) return " (no key)";
  return " (key file " + keyPath + ", fingerprint " + key->fingerprint() + ")";
}

AuthSettings authSettingsFromEnv() {
  AuthSettings s;
  if (auto mode = envVar("CHORUS_AUTH")) {
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
  if (auto t = envVar("CHORUS_HANDSHAKE_TIMEOUT")) {
    s.handshakeTime = std::chrono::seconds(parseEnvNumber("CHORUS_HANDSHAKE_TIMEOUT", *t, 1, 3600));
  }
  if (auto e = envVar("CHORUS_ENCRYPT")) {
    if (*e != "0" && *e != "1") {
      throw Error(ErrorCode::kInvalidArgument, "CHORUS_ENCRYPT='" + *e + "' is not 0 or 1");
    }
    s.encrypt = *e == "1";
  }
  if (s.mode == AuthMode::kOff) return s;
  if (auto path = envVar("CHORUS_AUTH_KEY_FILE")) {
    s.key = loadKeyFile(*path);
    s.keyPath = *path;
  }
  return s;
}

}  // namespace chorus::auth
