// The accepting side of the handshake (handshake_messages.h) as a state machine without I/O, so
// that poll loops (the store server, a rank's listener) can drive many at once: feed it what the
// client sent, send what it has to say, and look at its state.
#pragma once

#include "auth/handshake_messages.h"
#include "auth/job_key.h"
#include "auth/mac.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::auth {

class ServerHandshake {
 public:
  enum class State {
    kRunning,   // wants more bytes from the client
    kAccepted,  // the client proved it holds the key
    kRefused,   // see failure(); close the connection once output() is sent
  };

  // `context`: what the client joins (the same bytes the client uses).
  ServerHandshake(const JobKey& key, std::vector<uint8_t> context);

  // Consumes bytes the client sent and returns how many it used: it stops at the end of the
  // handshake, leaving the rest (the protocol that follows) to the caller. Throws only
  // Error(kSystem) when libcrypto fails.
  size_t take(const uint8_t* data, size_t n);

  State state() const { return state_; }
  // Why the client was refused: "wrong key", "no key (the client sent no handshake)", ...
  const std::string& failure() const { return failure_; }
  // True when the refused client spoke something else from its first bytes (no handshake).
  bool noHandshake() const { return noHandshake_; }
  // Both nonces, once accepted (they make the keys of an encrypted connection fresh).
  const Nonce& clientNonce() const { return clientNonce_; }
  const Nonce& serverNonce() const { return serverNonce_; }
  // Bytes to send to the client now; the caller empties it once sent.
  std::vector<uint8_t>& output() { return output_; }

 private:
  void onChallenge();
  void onProof();
  void refuse(std::string why, Refusal refusal);

  const JobKey& key_;
  std::vector<uint8_t> context_;
  State state_ = State::kRunning;
  size_t want_ = kChallengeBytes;
  std::vector<uint8_t> in_;
  std::vector<uint8_t> output_;
  Nonce clientNonce_{};
  Nonce serverNonce_{};
  bool sawChallenge_ = false;
  bool noHandshake_ = false;
  std::string failure_;
};

}  // namespace chorus::auth
