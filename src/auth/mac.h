// The cryptographic primitives of the handshake, all from OpenSSL's libcrypto: fresh nonces,
// HMAC-SHA256, and a comparison that takes the same time wherever the inputs differ.
#pragma once

#include "auth/job_key.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace chorus::auth {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

// RAND_bytes; throws Error(kSystem) if the generator fails.
Nonce freshNonce();

// HMAC-SHA256 with `key` over the concatenation of `parts`.
Mac hmacSha256(const JobKey& key, std::span<const std::span<const uint8_t>> parts);

// CRYPTO_memcmp: constant time.
bool macEqual(const Mac& a, const Mac& b);

}  // namespace chorus::auth
