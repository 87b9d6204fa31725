#include "transport/frame.h"

#include <bit>
#include <cstring>

namespace chorus::transport {
namespace {

template <class T>
void put(uint8_t* p, T v) {
  static_assert(std::endian::native == std::endian::little, "Chorus' wire format is little-endian");
  std::memcpy(p, &v, sizeof(T));
}
template <class T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

void encodeFrame(const FrameHeader& h, uint8_t out[kFrameHeaderBytes]) {
  std::memset(out, 0, kFrameHeaderBytes);
  put<uint32_t>(out + 0, kFrameMagic);
  put<uint8_t>(out + 4, kWireVersion);
  put<uint8_t>(out + 5, static_cast<uint8_t>(h.kind));
  put<uint8_t>(out + 6, static_cast<uint8_t>(h.op.kind));
  put<uint8_t>(out + 7, static_cast<uint8_t>(h.op.dtype));
  put<uint8_t>(out + 8, static_cast<uint8_t>(h.op.op));
  put<uint8_t>(out + 9, static_cast<uint8_t>(h.op.algo));
  put<uint8_t>(out + 10, static_cast<uint8_t>(h.op.wire));
  put<int32_t>(out + 12, h.op.root);
  put<uint64_t>(out + 16, h.op.seq);
  put<uint64_t>(out + 24, h.op.count);
  put<uint32_t>(out + 32, h.step);
  put<uint64_t>(out + 40, h.bytes);
}

std::optional<FrameHeader> decodeFrame(const uint8_t in[kFrameHeaderBytes], std::string* why) {
  auto fail = [&](std::string msg) -> std::optional<FrameHeader> {
    *why = std::move(msg);
    return std::nullopt;
  };
  if (get<uint32_t>(in) != kFrameMagic) return fail("bad frame magic (not a Chorus peer?)");
  if (in[4] != kWireVersion) {
    return fail("unsupported wire version " + std::to_string(in[4]) + " (this rank speaks " +
                std::to_string(kWireVersion) + ")");
  }
  FrameHeader h;
  uint8_t kind = in[5];
  if (kind < 1 || kind > 4) return fail("unknown frame kind " + std::to_string(kind));
  h.kind = static_cast<FrameKind>(kind);
  if (in[6] > static_cast<uint8_t>(kLastCollectiveKind) || !isValid(DataType(in[7])) ||
      !isValid(ReduceOp(in[8])) || in[9] > static_cast<uint8_t>(kLastAlgorithmId) ||
      !isValid(WireFormat(in[10]))) {
    return fail("frame header has out-of-range fields");
  }
  h.op.kind = static_cast<CollectiveKind>(in[6]);
  h.op.dtype = static_cast<DataType>(in[7]);
  h.op.op = static_cast<ReduceOp>(in[8]);
  h.op.algo = static_cast<AlgorithmId>(in[9]);
  h.op.wire = static_cast<WireFormat>(in[10]);
  h.op.root = get<int32_t>(in + 12);
  h.op.seq = get<uint64_t>(in + 16);
  h.op.count = get<uint64_t>(in + 24);
  h.step = get<uint32_t>(in + 32);
  h.bytes = get<uint64_t>(in + 40);
  if (h.bytes > kMaxFramePayload)
    return fail("frame length " + std::to_string(h.bytes) + " too large");
  if (h.kind == FrameKind::kAbort && (h.bytes < 4 || h.bytes > kMaxAbortMessage)) {
    return fail("abort frame with bad length");
  }
  if (h.kind == FrameKind::kBye && h.bytes != 0) return fail("bye frame with a payload");
  if (h.kind == FrameKind::kWake && h.bytes != 0) return fail("wake frame with a payload");
  return h;
}

}  // namespace chorus::transport
