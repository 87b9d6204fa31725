#include "auth/mac.h"

#include <chorus/error.hpp>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <memory>

namespace chorus::auth {

namespace {

// libcrypto is initialised when this library loads, which registers libcrypto's exit handler
// then. At exit, libcrypto frees the per-thread state only of the threads that ended before that
// handler ran, and exit handlers and static destructors run in reverse order of registration:
// registered first, the handler runs after the destructors that end this library's threads (a
// store server hosted by rank 0, the trace service), so their state is freed (LeakSanitizer
// reported it lost when libcrypto was first used on such a thread). Options 0 would return at
// once without registering it: ask for what the handshake and the record cipher use anyway. A
// failure here shows again, with its message, where libcrypto is used.
const bool cryptoInitialisedAtLoad =
    OPENSSL_init_crypto(OPENSSL_INIT_ADD_ALL_CIPHERS | OPENSSL_INIT_ADD_ALL_DIGESTS, nullptr) == 1;

}  // namespace

Nonce freshNonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) {
    throw Error(ErrorCode::kSystem, "authentication: RAND_bytes failed");
  }
  return n;
}

Mac hmacSha256(const JobKey& key, std::span<const std::span<const uint8_t>> parts) {
  std::unique_ptr<EVP_MAC, decltype(&EVP_MAC_free)> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr),
                                                        &EVP_MAC_free);
  if (!mac) throw Error(ErrorCode::kSystem, "authentication: HMAC is not available in libcrypto");
  std::unique_ptr<EVP_MAC_CTX, decltype(&EVP_MAC_CTX_free)> ctx(EVP_MAC_CTX_new(mac.get()),
                                                                &EVP_MAC_CTX_free);
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0),
                         OSSL_PARAM_construct_end()};
  Mac out{};
  size_t outLen = 0;
  bool ok = ctx && EVP_MAC_init(ctx.get(), key.bytes().data(), key.bytes().size(), params) == 1;
  for (auto part : parts) {
    ok = ok && EVP_MAC_update(ctx.get(), part.data(), part.size()) == 1;
  }
  ok = ok && EVP_MAC_final(ctx.get(), out.data(), &outLen, out.size()) == 1 && outLen == out.size();
  if (!ok) throw Error(ErrorCode::kSystem, "authentication: HMAC-SHA256 failed");
  return out;
}

bool macEqual(const Mac& a, const Mac& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace chorus::auth
