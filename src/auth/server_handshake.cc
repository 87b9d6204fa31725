#include "auth/server_handshake.h"

#include <algorithm>
#include <cstring>

namespace chorus::auth {

ServerHandshake::ServerHandshake(const JobKey& key, std::vector<uint8_t> context)
    : key_(key), context_(std::move(context)) {
  in_.reserve(kChallengeBytes);
}

size_t ServerHandshake::take(const uint8_t* data, size_t n) {
  size_t used = 0;
  while (state_ == State::kRunning && used < n) {
    const size_t k = std::min(want_ - in_.size(), n - used);
    in_.insert(in_.end(), data + used, data + used + k);
    used += k;
    // A client without a key speaks its own protocol from the first byte: say so early
    // instead of waiting for bytes it will never send.
    if (!sawChallenge_ && in_.size() >= 4 && !startsHandshake(in_.data(), in_.size())) {
      noHandshake_ = true;
      refuse("no key (the client sent no authentication handshake)", Refusal::kNone);
      break;
    }
    if (in_.size() < want_) break;
    if (!sawChallenge_) {
      onChallenge();
    } else {
      onProof();
    }
  }
  return used;
}

void ServerHandshake::onChallenge() {
  std::string why;
  if (!checkHead(in_.data(), MessageKind::kChallenge, &why)) {
    refuse(why, Refusal::kMalformed);
    return;
  }
  sawChallenge_ = true;
  std::memcpy(clientNonce_.data(), in_.data() + 8, kNonceBytes);
  serverNonce_ = freshNonce();
  const Mac mine = handshakeMac(key_, Role::kServer, context_, clientNonce_, serverNonce_);
  uint8_t body[kNonceBytes + kMacBytes];
  std::memcpy(body, serverNonce_.data(), kNonceBytes);
  std::memcpy(body + kNonceBytes, mine.data(), kMacBytes);
  const size_t at = output_.size();
  output_.resize(at + kAnswerBytes);
  encodeMessage(MessageKind::kAnswer, body, output_.data() + at);
  in_.clear();
  want_ = kProofBytes;
}

void ServerHandshake::onProof() {
  std::string why;
  if (!checkHead(in_.data(), MessageKind::kProof, &why)) {
    refuse(why, Refusal::kMalformed);
    return;
  }
  Mac theirs{};
  std::memcpy(theirs.data(), in_.data() + 8, kMacBytes);
  const Mac expected = handshakeMac(key_, Role::kClient, context_, clientNonce_, serverNonce_);
  if (!macEqual(theirs, expected)) {
    refuse("wrong key", Refusal::kWrongKey);
    return;
  }
  const size_t at = output_.size();
  output_.resize(at + kVerdictBytes);
  encodeVerdict(Refusal::kNone, output_.data() + at);
  state_ = State::kAccepted;
  in_.clear();
  want_ = 0;
}

void ServerHandshake::refuse(std::string why, Refusal refusal) {
  state_ = State::kRefused;
  failure_ = std::move(why);
  // A client that sent a well-formed challenge learns why it was turned away; a stranger
  // speaking another protocol gets nothing.
  if (refusal != Refusal::kNone) {
    const size_t at = output_.size();
    output_.resize(at + kVerdictBytes);
    encodeVerdict(refusal, output_.data() + at);
  }
  in_.clear();
  want_ = 0;
}

}  // namespace chorus::auth
