// The connecting side of the handshake (handshake_messages.h), run on a connected socket
// before anything else is sent.
#pragma once

#include "auth/job_key.h"
#include "auth/mac.h"
#include "common/deadline.h"

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::auth {

enum class ClientOutcome {
  kAccepted,
  kRefused,   // the server does not hold this key, or refused ours: a wrong key on one side
  kNoAnswer,  // the server closed or sent something else: it may not authenticate at all
  kTimeout,
};

struct ClientResult {
  ClientOutcome outcome = ClientOutcome::kAccepted;
  std::string why;  // for messages: "the server refused this key (wrong key)", ...
  // Both nonces of an accepted handshake: they make the keys of an encrypted connection fresh.
  Nonce clientNonce{};
  Nonce serverNonce{};
  bool ok() const { return outcome == ClientOutcome::kAccepted; }
};

// Proves knowledge of `key` to the server on `fd` and checks the server's proof, within the
// deadline. `context` must be the server's. Throws only Error(kSystem) when libcrypto fails.
ClientResult authenticateToServer(int fd, const JobKey& key, const std::vector<uint8_t>& context,
                                  const Deadline& deadline);

}  // namespace chorus::auth
