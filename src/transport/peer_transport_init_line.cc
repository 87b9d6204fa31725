#include "transport/init_line.h"

#include "auth/settings.h"

#include <cstdio>

namespace chorus::transport {

namespace {

std::string modeName(auth::AuthMode mode) {
  switch (mode) {
    case auth::AuthMode::kAuto:
      return "auto";
    case auth::AuthMode::kOff:
      return "off";
    case auth::AuthMode::kRequired:
      return "required";
  }
  return "?";
}

std::string authentication(const auth::AuthSettings& auth) {
  const std::string mode = "CHORUS_AUTH=" + modeName(auth.mode);
  if (auth.enabled()) {
    return "authentication on (" + mode + ", key file " + auth.keyPath + ", fingerprint " +
           auth.key->fingerprint() + ": HMAC-SHA256 handshake on the store and every connection)";
  }
  if (auth.mode == auth::AuthMode::kOff) return "authentication off (" + mode + ")";
  return "authentication off (" + mode + ", no key: CHORUS_AUTH_KEY_FILE unset)";
}

std::string encryption(const auth::AuthSettings& auth) {
  if (auth.encrypt) {
    return "encryption on (CHORUS_ENCRYPT=1: AES-256-GCM on the TCP connections between ranks; "
           "shared memory within a host is not encrypted)";
  }
  return "encryption off (CHORUS_ENCRYPT=1 turns it on)";
}

std::string initLine(int rank, int size, const auth::AuthSettings& auth,
                     const std::string& version) {
  const std::string who = rank >= 0 ? std::to_string(rank) : "newcomer";
  const std::string where =
      rank >= 0 ? "rank " + who + " of " + std::to_string(size) : "joining a running job";
  return "chorus[" + who + "]: init: chorus " + version + ", " + where + "; " +
         authentication(auth) + "; " + encryption(auth);
}

}  // namespace

void printInitLine(const Options& options, int rank, int size, const std::string& version) {
  if (options.debug == DebugLevel::kOff) return;
  std::fprintf(stderr, "%s\n",
               initLine(rank, size, auth::authSettingsFrom(options.auth), version).c_str());
}

}  // namespace chorus::transport
