#include "auth/record_cipher.h"

#include <chorus/error.hpp>

#include <openssl/core_names.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include <cstring>
#include <memory>
#include <vector>

namespace chorus::auth {
namespace {

[[noreturn]] void cryptoFailed(const char* what) {
  throw Error(ErrorCode::kSystem, std::string("encryption: ") + what + " failed in libcrypto");
}

StreamKey hkdf(const JobKey& key, const std::vector<uint8_t>& salt,
               const std::vector<uint8_t>& info) {
  std::unique_ptr<EVP_KDF, decltype(&EVP_KDF_free)> kdf(EVP_KDF_fetch(nullptr, "HKDF", nullptr),
                                                        &EVP_KDF_free);
  if (!kdf) cryptoFailed("HKDF lookup");
  std::unique_ptr<EVP_KDF_CTX, decltype(&EVP_KDF_CTX_free)> ctx(EVP_KDF_CTX_new(kdf.get()),
                                                                &EVP_KDF_CTX_free);
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(
          OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(key.bytes().data()), key.bytes().size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<uint8_t*>(salt.data()),
                                        salt.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<uint8_t*>(info.data()),
                                        info.size()),
      OSSL_PARAM_construct_end()};
  StreamKey out{};
  if (!ctx || EVP_KDF_derive(ctx.get(), out.data(), out.size(), params) != 1) {
    cryptoFailed("HKDF");
  }
  return out;
}

void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

StreamKeys deriveStreamKeys(const JobKey& key, Role self, std::span<const uint8_t> context,
                            const Nonce& clientNonce, const Nonce& serverNonce) {
  std::vector<uint8_t> salt(clientNonce.begin(), clientNonce.end());
  salt.insert(salt.end(), serverNonce.begin(), serverNonce.end());
  auto info = [&](const std::string& direction) {
    const std::string label = "chorus-encrypt-1 " + direction;
    std::vector<uint8_t> v(label.size() + context.size());
    std::memcpy(v.data(), label.data(), label.size());
    if (!context.empty()) std::memcpy(v.data() + label.size(), context.data(), context.size());
    return v;
  };
  const StreamKey toServer = hkdf(key, salt, info("client->server "));
  const StreamKey toClient = hkdf(key, salt, info("server->client "));
  return self == Role::kClient ? StreamKeys{toServer, toClient} : StreamKeys{toClient, toServer};
}

RecordCipher::RecordCipher(const StreamKey& key, Direction direction) : ctx_(EVP_CIPHER_CTX_new()) {
  const int encrypt = direction == Direction::kSeal ? 1 : 0;
  if (!ctx_ ||
      EVP_CipherInit_ex(ctx_, EVP_aes_256_gcm(), nullptr, key.data(), nullptr, encrypt) != 1) {
    EVP_CIPHER_CTX_free(ctx_);
    cryptoFailed("AES-256-GCM setup");
  }
}

RecordCipher::~RecordCipher() { EVP_CIPHER_CTX_free(ctx_); }

void RecordCipher::startRecord(uint32_t plain, int encrypt) {
  uint8_t iv[12] = {};
  for (int i = 0; i < 8; ++i) iv[4 + i] = static_cast<uint8_t>(counter_ >> (8 * i));
  uint8_t head[kRecordHeadBytes];
  put32(head, plain);
  int outLen = 0;
  if (EVP_CipherInit_ex(ctx_, nullptr, nullptr, nullptr, iv, encrypt) != 1 ||
      EVP_CipherUpdate(ctx_, nullptr, &outLen, head, sizeof(head)) != 1) {
    cryptoFailed("AES-256-GCM record setup");
  }
}

void RecordCipher::seal(std::span<const std::span<const uint8_t>> parts, uint8_t* out) {
  size_t total = 0;
  for (auto p : parts) total += p.size();
  if (total == 0 || total > kMaxRecordPlain) {
    throw Error(ErrorCode::kInternal, "encryption: record of " + std::to_string(total) + " bytes");
  }
  put32(out, static_cast<uint32_t>(total));
  startRecord(static_cast<uint32_t>(total), 1);
  uint8_t* at = out + kRecordHeadBytes;
  for (auto p : parts) {
    if (p.empty()) continue;
    int n = 0;
    if (EVP_CipherUpdate(ctx_, at, &n, p.data(), static_cast<int>(p.size())) != 1) {
      cryptoFailed("AES-256-GCM encryption");
    }
    at += n;
  }
  int n = 0;
  if (EVP_CipherFinal_ex(ctx_, at, &n) != 1) cryptoFailed("AES-256-GCM encryption");
  at += n;
  if (EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, kRecordTagBytes, at) != 1) {
    cryptoFailed("AES-256-GCM tag");
  }
  ++counter_;
}

bool RecordCipher::open(const uint8_t* record, size_t plain, uint8_t* out) {
  startRecord(static_cast<uint32_t>(plain), 0);
  int n = 0;
  if (EVP_CipherUpdate(ctx_, out, &n, record + kRecordHeadBytes, static_cast<int>(plain)) != 1) {
    cryptoFailed("AES-256-GCM decryption");
  }
  uint8_t tag[kRecordTagBytes];
  std::memcpy(tag, record + kRecordHeadBytes + plain, kRecordTagBytes);
  if (EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_TAG, kRecordTagBytes, tag) != 1) {
    cryptoFailed("AES-256-GCM tag");
  }
  int last = 0;
  const bool authentic = EVP_CipherFinal_ex(ctx_, out + n, &last) == 1;
  // The counter moves on either way: after a failure the stream is dead anyway.
  ++counter_;
  return authentic;
}

std::optional<size_t> recordLength(const uint8_t head[kRecordHeadBytes], std::string* why) {
  const uint32_t n = uint32_t{head[0]} | uint32_t{head[1]} << 8 | uint32_t{head[2]} << 16 |
                     uint32_t{head[3]} << 24;
  if (n == 0 || n > kMaxRecordPlain) {
    *why = "encrypted record length " + std::to_string(n) + " out of range (1.." +
           std::to_string(kMaxRecordPlain) + ")";
    return std::nullopt;
  }
  return n;
}

}  // namespace chorus::auth
