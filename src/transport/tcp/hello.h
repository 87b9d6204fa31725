// The first message on every connection: who is calling whom, in which job.
#pragma once

#include "transport/job_id.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace chorus::transport::tcp {

inline constexpr uint32_t kHelloMagic = 0x48524843;  // "CHRH"
inline constexpr uint8_t kHelloVersion = 1;
inline constexpr size_t kHelloBytes = 72;

// Layout (little-endian): 0 u32 magic | 4 u8 version | 5 u8 kind (1 hello, 2 accept) |
// 6 u16 flags (bit 0: the sender encrypts, CHORUS_ENCRYPT=1; other bits zero) | 8 u8[16] job id |
// 24 i32 from | 28 i32 to | 32 i32 world size | 36 u32 auth length | 40 u8[32] auth (unused, zero:
// with a job key the connection has already been authenticated by the handshake of
// auth/handshake_messages.h before the hello).
inline constexpr uint16_t kHelloEncrypted = 1;

struct Hello {
  uint8_t kind = 1;
  JobId job{};
  int32_t from = -1;
  int32_t to = -1;
  int32_t worldSize = 0;
  uint16_t flags = 0;
};

void encodeHello(const Hello& h, uint8_t out[kHelloBytes]);
std::optional<Hello> decodeHello(const uint8_t in[kHelloBytes], std::string* why);

}  // namespace chorus::transport::tcp
