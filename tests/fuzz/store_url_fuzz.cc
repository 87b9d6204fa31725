// The store URL parser over any text; parses only, never connects or creates files.
#include "fuzz_check.h"
#include "store/store_url.h"

#include <cstdint>
#include <string>

using namespace chorus;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string url(reinterpret_cast<const char*>(data), size);
  try {
    store::StoreUrl parsed = store::parseStoreUrl(url);
    if (parsed.kind == store::StoreUrl::Kind::kTcp) {
      if (parsed.host.empty() || parsed.port < 1 || parsed.port > 65535) {
        fuzz::finding("parseStoreUrl accepted a TCP URL without a host or a valid port");
      }
    } else if (parsed.path.empty() || parsed.path[0] != '/') {
      fuzz::finding("parseStoreUrl accepted a file URL without an absolute path");
    }
  } catch (const Error& e) {
    fuzz::requireMessage(e);
  }
  return 0;
}
