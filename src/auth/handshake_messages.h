// The bytes of the authentication handshake that opens every TCP connection (rank to rank, and
// store client to store server) when a job key is set:
//
//   client -> server  challenge  u32 magic "CHAU" | u8 version | u8 kind 1 | u16 0 | nonce_c[32]
//   server -> client  answer     magic | version | kind 2 | u16 0 | nonce_s[32] | mac_s[32]
//   client -> server  proof      magic | version | kind 3 | u16 0 | mac_c[32]
//   server -> client  verdict    magic | version | kind 4 | u16 reason (0: accepted)
//
// mac_x = HMAC-SHA256(key, "chorus-auth-1" | role x ("server"/"client") | u32 context length |
// context | nonce_c | nonce_s). Both nonces are fresh from each side's RAND_bytes, so a recorded
// handshake proves nothing on a new connection; the role label keeps one side's proof from being
// reflected as the other's; the context binds the proof to what is being joined (the store, or
// one communicator's job id). Little-endian, fixed sizes.
#pragma once

#include "auth/job_key.h"
#include "auth/mac.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace chorus::auth {

inline constexpr uint32_t kHandshakeMagic = 0x55414843;  // "CHAU"
inline constexpr uint8_t kHandshakeVersion = 1;
inline constexpr size_t kChallengeBytes = 8 + kNonceBytes;
inline constexpr size_t kAnswerBytes = 8 + kNonceBytes + kMacBytes;
inline constexpr size_t kProofBytes = 8 + kMacBytes;
inline constexpr size_t kVerdictBytes = 8;

enum class MessageKind : uint8_t { kChallenge = 1, kAnswer = 2, kProof = 3, kVerdict = 4 };

// Why a server refused: sent in the verdict so the client can say what went wrong.
enum class Refusal : uint16_t { kNone = 0, kWrongKey = 1, kMalformed = 2 };

enum class Role : uint8_t { kServer, kClient };

// The MAC one side sends.
Mac handshakeMac(const JobKey& key, Role role, std::span<const uint8_t> context,
                 const Nonce& clientNonce, const Nonce& serverNonce);

// Writes the 8-byte message head followed by `body` into out (8 + body.size() bytes).
void encodeMessage(MessageKind kind, std::span<const uint8_t> body, uint8_t* out);
void encodeVerdict(Refusal refusal, uint8_t out[kVerdictBytes]);

// True when the first four bytes are the handshake magic.
bool startsHandshake(const uint8_t* in, size_t n);

// Checks the head of a message of `expected` kind; on failure returns false and says why.
bool checkHead(const uint8_t* in, MessageKind expected, std::string* why);

// The verdict's refusal, or nullopt (with *why) when the message is not a verdict.
std::optional<Refusal> decodeVerdict(const uint8_t in[kVerdictBytes], std::string* why);

std::string describeRefusal(Refusal r);

}  // namespace chorus::auth
