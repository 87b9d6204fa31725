// decodeHello over any 72 bytes: rejected with a reason, or accepted and re-encoded unchanged.
#include "fuzz_check.h"
#include "transport/tcp/hello.h"

#include <cstdint>
#include <cstring>
#include <string>

using namespace chorus;
using namespace chorus::transport::tcp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kHelloBytes) return 0;
  uint8_t in[kHelloBytes];
  std::memcpy(in, data, kHelloBytes);
  std::string why;
  auto h = decodeHello(in, &why);
  if (!h) {
    if (why.empty()) fuzz::finding("decodeHello refused a hello without saying why");
    return 0;
  }
  uint8_t again[kHelloBytes];
  encodeHello(*h, again);
  auto h2 = decodeHello(again, &why);
  if (!h2 || h2->kind != h->kind || h2->job != h->job || h2->from != h->from || h2->to != h->to ||
      h2->worldSize != h->worldSize) {
    fuzz::finding("an accepted hello does not survive encode and decode");
  }
  return 0;
}
