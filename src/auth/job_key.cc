#include "auth/job_key.h"

#include <chorus/error.hpp>

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

namespace chorus::auth {

JobKey::~JobKey() {
  if (!bytes_.empty()) OPENSSL_cleanse(bytes_.data(), bytes_.size());
}

std::string JobKey::fingerprint() const {
  uint8_t digest[SHA256_DIGEST_LENGTH];
  SHA256(bytes_.data(), bytes_.size(), digest);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 8; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

JobKey JobKey::random() {
  std::vector<uint8_t> bytes(kGeneratedKeyBytes);
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    throw Error(ErrorCode::kSystem, "creating a job key: RAND_bytes failed");
  }
  return JobKey(std::move(bytes));
}

}  // namespace chorus::auth
