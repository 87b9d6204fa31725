// decodeFrame over any 48 bytes: rejected with a reason, or accepted and re-encoded unchanged.
#include "fuzz_check.h"
#include "transport/frame.h"

#include <cstdint>
#include <cstring>
#include <string>

using namespace chorus;
using namespace chorus::transport;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kFrameHeaderBytes) return 0;
  uint8_t in[kFrameHeaderBytes];
  std::memcpy(in, data, kFrameHeaderBytes);
  std::string why;
  auto h = decodeFrame(in, &why);
  if (!h) {
    if (why.empty()) fuzz::finding("decodeFrame refused a header without saying why");
    return 0;
  }
  if (h->bytes > kMaxFramePayload) fuzz::finding("decodeFrame accepted an oversized length");
  // The reserved bytes are not decoded, so compare a re-encoding with its own decoding.
  uint8_t again[kFrameHeaderBytes];
  encodeFrame(*h, again);
  auto h2 = decodeFrame(again, &why);
  if (!h2 || h2->kind != h->kind || h2->bytes != h->bytes || h2->step != h->step ||
      h2->op.seq != h->op.seq || h2->op.count != h->op.count || h2->op.root != h->op.root) {
    fuzz::finding("an accepted frame header does not survive encode and decode");
  }
  return 0;
}
