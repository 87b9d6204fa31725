#include "auth/settings.h"

#include "auth/key_file.h"

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

AuthSettings authSettingsFrom(const AuthOptions& options) {
  AuthSettings s;
  s.mode = options.mode;
  s.handshakeTime = options.handshakeTimeout;
  s.encrypt = options.encrypt;
  if (s.mode == AuthMode::kOff || options.keyFile.empty()) return s;
  s.key = loadKeyFile(options.keyFile);
  s.keyPath = options.keyFile;
  return s;
}

}  // namespace chorus::auth
