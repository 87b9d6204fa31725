// openStore: "tcp://host:port", "file:///abs/path" or "etcd[s]://host:port,.../prefix" (parsed
// by store_url.cc).
#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include "store/store_url.h"
#if CHORUS_HAVE_ETCD
#include "store/etcd/etcd_store.h"
#endif

namespace chorus {

std::shared_ptr<Store> openStore(const std::string& url, std::chrono::milliseconds timeout) {
  store::StoreUrl parsed = store::parseStoreUrl(url);
  if (parsed.kind == store::StoreUrl::Kind::kFile) return makeFileStore(parsed.path);
  if (parsed.kind == store::StoreUrl::Kind::kEtcd) {
#if CHORUS_HAVE_ETCD
    return store::etcd::openEtcdStore(parsed, timeout);
#else
    throw Error(ErrorCode::kInvalidArgument,
                "openStore: \"" + url +
                    "\": this libchorus was built without the etcd store (it needs libcurl and "
                    "nlohmann-json when built: scripts/install-deps, then rebuild)");
#endif
  }
  return makeTcpStore(parsed.host, parsed.port, timeout);
}

}  // namespace chorus
