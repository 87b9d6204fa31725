// Encryption of the byte stream between two ranks (CHORUS_ENCRYPT=1): AES-256-GCM records from
// libcrypto, one key per direction derived from the job key and both handshake nonces.
//
//   record = u32 plaintext length n (1 .. kMaxRecordPlain) | ciphertext[n] | tag[16]
//
// The length is the additional authenticated data; the 12-byte nonce is 4 zero bytes and the
// record's counter (u64, little-endian), which starts at 0 on each direction of each connection
// and grows by one per record. The counter is never sent: a replayed, reordered, dropped or
// altered record fails the tag check at the receiver, and keys are fresh per connection (both
// nonces go into them), so a counter value is never used twice with one key.
#pragma once

#include "auth/handshake_messages.h"
#include "auth/job_key.h"
#include "auth/mac.h"

#include <openssl/evp.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace chorus::auth {

inline constexpr size_t kRecordHeadBytes = 4;
inline constexpr size_t kRecordTagBytes = 16;
inline constexpr size_t kRecordOverhead = kRecordHeadBytes + kRecordTagBytes;
// Bounds the memory of a connection (one record each way) and the data released before its
// tag is checked; large enough that the per-record cost is small next to the per-byte cost.
inline constexpr size_t kMaxRecordPlain = 64 * 1024;

using StreamKey = std::array<uint8_t, 32>;

struct StreamKeys {
  StreamKey send;
  StreamKey receive;
};

// HKDF-SHA256 (input: the job key; salt: client nonce | server nonce; info: a label, the
// direction and the connection's context): the keys of the side playing `self`.
StreamKeys deriveStreamKeys(const JobKey& key, Role self, std::span<const uint8_t> context,
                            const Nonce& clientNonce, const Nonce& serverNonce);

// One direction's AES-256-GCM context and counter.
class RecordCipher {
 public:
  enum class Direction { kSeal, kOpen };
  RecordCipher(const StreamKey& key, Direction direction);
  ~RecordCipher();
  RecordCipher(const RecordCipher&) = delete;
  RecordCipher& operator=(const RecordCipher&) = delete;

  // Seals the concatenation of `parts` (1 .. kMaxRecordPlain bytes in all) as the next record
  // into out (total + kRecordOverhead bytes). Throws Error(kSystem) when libcrypto fails.
  void seal(std::span<const std::span<const uint8_t>> parts, uint8_t* out);

  // Opens the next record (head, ciphertext and tag at `record`, plaintext length `plain` as
  // read by recordLength) into out; false when the tag does not match (out then holds garbage).
  bool open(const uint8_t* record, size_t plain, uint8_t* out);

  // Records sealed or opened so far.
  uint64_t counter() const { return counter_; }

 private:
  void startRecord(uint32_t plain, int encrypt);

  EVP_CIPHER_CTX* ctx_;
  uint64_t counter_ = 0;
};

// The plaintext length announced by a record's head, or nullopt (with *why) when it is out of
// range.
std::optional<size_t> recordLength(const uint8_t head[kRecordHeadBytes], std::string* why);

}  // namespace chorus::auth
