#include "auth/client_handshake.h"

#include "auth/handshake_messages.h"
#include "common/socket_io.h"

#include <cstring>

namespace chorus::auth {
namespace {

ClientResult lost(const IoResult& io, const char* when) {
  if (io.status == IoStatus::kTimeout) {
    return {ClientOutcome::kTimeout, std::string("timed out ") + when};
  }
  return {ClientOutcome::kNoAnswer,
          std::string("connection ") + (io.status == IoStatus::kClosed ? "closed" : io.text()) +
              " " + when + " (does the other side authenticate with a key?)"};
}

// Reads the 8-byte head; a verdict in place of the expected message is a refusal.
ClientResult readHead(int fd, uint8_t head[8], MessageKind expected, const Deadline& deadline) {
  IoResult io = recvAll(fd, head, 8, deadline);
  if (!io.ok()) return lost(io, "during the authentication handshake");
  std::string why;
  if (expected != MessageKind::kVerdict && head[5] == static_cast<uint8_t>(MessageKind::kVerdict)) {
    auto refusal = decodeVerdict(head, &why);
    if (refusal) return {ClientOutcome::kRefused, "refused: " + describeRefusal(*refusal)};
  }
  if (!checkHead(head, expected, &why)) {
    return {ClientOutcome::kNoAnswer, "the other side answered the handshake with " + why};
  }
  return {};
}

}  // namespace

ClientResult authenticateToServer(int fd, const JobKey& key, const std::vector<uint8_t>& context,
                                  const Deadline& deadline) {
  const Nonce mine = freshNonce();
  uint8_t challenge[kChallengeBytes];
  encodeMessage(MessageKind::kChallenge, mine, challenge);
  IoResult io = sendAll(fd, challenge, sizeof(challenge), deadline);
  if (!io.ok()) return lost(io, "sending the authentication challenge");

  uint8_t answer[kAnswerBytes];
  ClientResult head = readHead(fd, answer, MessageKind::kAnswer, deadline);
  if (!head.ok()) return head;
  io = recvAll(fd, answer + 8, kAnswerBytes - 8, deadline);
  if (!io.ok()) return lost(io, "during the authentication handshake");
  Nonce theirs{};
  Mac serverMac{};
  std::memcpy(theirs.data(), answer + 8, kNonceBytes);
  std::memcpy(serverMac.data(), answer + 8 + kNonceBytes, kMacBytes);
  const bool serverKnowsKey =
      macEqual(serverMac, handshakeMac(key, Role::kServer, context, mine, theirs));

  // The proof goes out even when the server's did not check, so that the server, too, can log
  // the wrong key; it is bound to both nonces and useless elsewhere.
  const Mac proof = handshakeMac(key, Role::kClient, context, mine, theirs);
  uint8_t proofMsg[kProofBytes];
  encodeMessage(MessageKind::kProof, proof, proofMsg);
  io = sendAll(fd, proofMsg, sizeof(proofMsg), deadline);
  if (!serverKnowsKey) {
    return {ClientOutcome::kRefused, "the other side does not hold this key (wrong key)"};
  }
  if (!io.ok()) return lost(io, "sending the authentication proof");

  uint8_t verdict[kVerdictBytes];
  head = readHead(fd, verdict, MessageKind::kVerdict, deadline);
  if (!head.ok()) return head;
  std::string why;
  auto refusal = decodeVerdict(verdict, &why);
  if (!refusal) return {ClientOutcome::kNoAnswer, "bad verdict: " + why};
  if (*refusal != Refusal::kNone) {
    return {ClientOutcome::kRefused, "refused: " + describeRefusal(*refusal)};
  }
  ClientResult accepted;
  accepted.clientNonce = mine;
  accepted.serverNonce = theirs;
  return accepted;
}

}  // namespace chorus::auth
