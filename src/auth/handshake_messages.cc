#include "auth/handshake_messages.h"

#include <array>
#include <cstring>

namespace chorus::auth {
namespace {

constexpr char kLabel[] = "chorus-auth-1";

uint32_t load32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace

Mac handshakeMac(const JobKey& key, Role role, std::span<const uint8_t> context,
                 const Nonce& clientNonce, const Nonce& serverNonce) {
  static constexpr char kServer[] = "server";
  static constexpr char kClient[] = "client";
  const char* who = role == Role::kServer ? kServer : kClient;
  const auto n = static_cast<uint32_t>(context.size());
  const uint8_t length[4] = {static_cast<uint8_t>(n), static_cast<uint8_t>(n >> 8),
                             static_cast<uint8_t>(n >> 16), static_cast<uint8_t>(n >> 24)};
  const std::array<std::span<const uint8_t>, 6> parts = {
      std::span(reinterpret_cast<const uint8_t*>(kLabel), sizeof(kLabel) - 1),
      std::span(reinterpret_cast<const uint8_t*>(who), std::strlen(who)),
      std::span<const uint8_t>(length, 4),
      context,
      std::span<const uint8_t>(clientNonce),
      std::span<const uint8_t>(serverNonce)};
  return hmacSha256(key, parts);
}

void encodeMessage(MessageKind kind, std::span<const uint8_t> body, uint8_t* out) {
  out[0] = static_cast<uint8_t>(kHandshakeMagic);
  out[1] = static_cast<uint8_t>(kHandshakeMagic >> 8);
  out[2] = static_cast<uint8_t>(kHandshakeMagic >> 16);
  out[3] = static_cast<uint8_t>(kHandshakeMagic >> 24);
  out[4] = kHandshakeVersion;
  out[5] = static_cast<uint8_t>(kind);
  out[6] = 0;
  out[7] = 0;
  if (!body.empty()) std::memcpy(out + 8, body.data(), body.size());
}

void encodeVerdict(Refusal refusal, uint8_t out[kVerdictBytes]) {
  encodeMessage(MessageKind::kVerdict, {}, out);
  out[6] = static_cast<uint8_t>(static_cast<uint16_t>(refusal));
  out[7] = static_cast<uint8_t>(static_cast<uint16_t>(refusal) >> 8);
}

bool startsHandshake(const uint8_t* in, size_t n) {
  return n >= 4 && load32(in) == kHandshakeMagic;
}

bool checkHead(const uint8_t* in, MessageKind expected, std::string* why) {
  if (load32(in) != kHandshakeMagic) {
    *why = "not an authentication handshake";
    return false;
  }
  if (in[4] != kHandshakeVersion) {
    *why = "handshake version " + std::to_string(in[4]) + " (this side speaks " +
           std::to_string(kHandshakeVersion) + ")";
    return false;
  }
  if (in[5] != static_cast<uint8_t>(expected)) {
    *why = "handshake message of kind " + std::to_string(in[5]) + " where kind " +
           std::to_string(static_cast<int>(expected)) + " belongs";
    return false;
  }
  if (expected != MessageKind::kVerdict && (in[6] != 0 || in[7] != 0)) {
    *why = "malformed handshake (reserved bytes set)";
    return false;
  }
  return true;
}

std::optional<Refusal> decodeVerdict(const uint8_t in[kVerdictBytes], std::string* why) {
  if (!checkHead(in, MessageKind::kVerdict, why)) return std::nullopt;
  const uint16_t code = static_cast<uint16_t>(in[6] | in[7] << 8);
  if (code > static_cast<uint16_t>(Refusal::kMalformed)) {
    *why = "unknown refusal code " + std::to_string(code);
    return std::nullopt;
  }
  return static_cast<Refusal>(code);
}

std::string describeRefusal(Refusal r) {
  switch (r) {
    case Refusal::kNone:
      return "accepted";
    case Refusal::kWrongKey:
      return "wrong key";
    case Refusal::kMalformed:
      return "malformed handshake";
  }
  return "unknown refusal";
}

}  // namespace chorus::auth
