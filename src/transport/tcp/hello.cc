#include "transport/tcp/hello.h"

#include <cstring>

namespace chorus::transport::tcp {

void encodeHello(const Hello& h, uint8_t out[kHelloBytes]) {
  std::memset(out, 0, kHelloBytes);
  std::memcpy(out, &kHelloMagic, 4);
  out[4] = kHelloVersion;
  out[5] = h.kind;
  std::memcpy(out + 6, &h.flags, 2);
  std::memcpy(out + 8, h.job.data(), h.job.size());
  std::memcpy(out + 24, &h.from, 4);
  std::memcpy(out + 28, &h.to, 4);
  std::memcpy(out + 32, &h.worldSize, 4);
}

std::optional<Hello> decodeHello(const uint8_t in[kHelloBytes], std::string* why) {
  uint32_t magic;
  std::memcpy(&magic, in, 4);
  if (magic != kHelloMagic) {
    *why = "not a Chorus hello";
    return std::nullopt;
  }
  if (in[4] != kHelloVersion) {
    *why = "hello version " + std::to_string(in[4]) + " (this rank speaks " +
           std::to_string(kHelloVersion) + ")";
    return std::nullopt;
  }
  Hello h;
  h.kind = in[5];
  if (h.kind != 1 && h.kind != 2) {
    *why = "bad hello kind";
    return std::nullopt;
  }
  std::memcpy(&h.flags, in + 6, 2);
  if (h.flags & ~kHelloEncrypted) {
    *why = "unknown hello flags " + std::to_string(h.flags);
    return std::nullopt;
  }
  std::memcpy(h.job.data(), in + 8, h.job.size());
  std::memcpy(&h.from, in + 24, 4);
  std::memcpy(&h.to, in + 28, 4);
  std::memcpy(&h.worldSize, in + 32, 4);
  return h;
}

}  // namespace chorus::transport::tcp
