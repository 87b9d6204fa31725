// The wire frame header that precedes every message between ranks (docs/wire.md).
#pragma once

#include "common/op_desc.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace chorus::transport {

inline constexpr uint32_t kFrameMagic = 0x53524843;  // "CHRS" little-endian
inline constexpr uint8_t kWireVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 48;
// Upper bound on one frame's payload; a larger length means a corrupt or hostile stream.
inline constexpr uint64_t kMaxFramePayload = uint64_t{1} << 40;
inline constexpr uint64_t kMaxAbortMessage = 64 * 1024;

enum class FrameKind : uint8_t {
  kData = 1,   // payload of one send
  kAbort = 2,  // payload: u32 error code + message; the sender aborted its communicator
  kBye = 3,    // no payload; the sender closed its communicator cleanly
  kWake = 4,   // no payload; look at the shared-memory rings again (sent only to a sleeping peer)
};

struct FrameHeader {
  FrameKind kind = FrameKind::kData;
  OpDesc op;           // the collective this frame belongs to
  uint32_t step = 0;   // message index within the collective, per direction
  uint64_t bytes = 0;  // payload length
};

// Fixed-width little-endian layout:
//   0 u32 magic | 4 u8 version | 5 u8 kind | 6 u8 collective | 7 u8 dtype | 8 u8 op | 9 u8 algo
//  10 u8 wire format | 11 u8 reserved | 12 i32 root | 16 u64 seq | 24 u64 count | 32 u32 step | 36
//  u32 reserved 40 u64 payload bytes
void encodeFrame(const FrameHeader& h, uint8_t out[kFrameHeaderBytes]);

// Decodes and validates (magic, version, kind, enum ranges, length bound). On failure returns
// nullopt and describes the problem in *why.
std::optional<FrameHeader> decodeFrame(const uint8_t in[kFrameHeaderBytes], std::string* why);

}  // namespace chorus::transport
