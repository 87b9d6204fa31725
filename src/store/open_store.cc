// openStore: "tcp://host:port" or "file:///abs/path" (parsed by store_url.cc).
#include <chorus/store.hpp>

#include "store/store_url.h"

namespace chorus {

std::shared_ptr<Store> openStore(const std::string& url, std::chrono::milliseconds timeout) {
  store::StoreUrl parsed = store::parseStoreUrl(url);
  if (parsed.kind == store::StoreUrl::Kind::kFile) return makeFileStore(parsed.path);
  return makeTcpStore(parsed.host, parsed.port, timeout);  // AuthOptions::fromEnv()
}

std::shared_ptr<Store> openStore(const std::string& url, std::chrono::milliseconds timeout,
                                 const AuthOptions& auth) {
  store::StoreUrl parsed = store::parseStoreUrl(url);
  if (parsed.kind == store::StoreUrl::Kind::kFile) return makeFileStore(parsed.path);
  return makeTcpStore(parsed.host, parsed.port, timeout, auth);
}

}  // namespace chorus
