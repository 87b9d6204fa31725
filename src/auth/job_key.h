// The per-job secret that authenticates ranks and store clients, and how it is named in
// messages (a fingerprint: the key itself is never printed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus::auth {

inline constexpr size_t kMinKeyBytes = 16;
inline constexpr size_t kMaxKeyBytes = 4096;
inline constexpr size_t kGeneratedKeyBytes = 32;

class JobKey {
 public:
  JobKey() = default;
  explicit JobKey(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  JobKey(const JobKey&) = default;
  JobKey& operator=(const JobKey&) = default;
  JobKey(JobKey&&) = default;
  JobKey& operator=(JobKey&&) = default;
  ~JobKey();  // wipes the bytes

  const std::vector<uint8_t>& bytes() const { return bytes_; }
  bool empty() const { return bytes_.empty(); }
  // First 8 bytes of SHA-256(key) in hex: tells two keys apart in messages, reveals nothing usable.
  std::string fingerprint() const;

  // kGeneratedKeyBytes from the system's CSPRNG (RAND_bytes). Throws Error(kSystem).
  static JobKey random();

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace chorus::auth
