// openStore: "tcp://host:port", "file:///abs/path" or "etcd[s]://host:port,.../prefix" (parsed
// by store_url.cc).
#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include "store/store_url.h"
#if CHORUS_HAVE_ETCD
#include "store/etcd/etcd_store.h"
#endif

namespace chorus {

namespace {

std::shared_ptr<Store> openEtcd(const std::string& url, const store::StoreUrl& parsed,
                                std::chrono::milliseconds timeout, const AuthOptions& auth) {
#if CHORUS_HAVE_ETCD
  (void)url;
  return store::etcd::openEtcdStore(parsed, timeout, auth);
#else
  (void)parsed;
  (void)timeout;
  (void)auth;
  throw Error(ErrorCode::kInvalidArgument,
              "openStore: \"" + url +
                  "\": this libchorus was built without the etcd store (it needs libcurl and "
                  "nlohmann-json when built: scripts/install-deps, then rebuild)");
#endif
}

}  // namespace

std::shared_ptr<Store> openStore(const std::string& url, std::chrono::milliseconds timeout) {
  store::StoreUrl parsed = store::parseStoreUrl(url);
  if (parsed.kind == store::StoreUrl::Kind::kFile) return makeFileStore(parsed.path);
  if (parsed.kind == store::StoreUrl::Kind::kEtcd) {
    return openEtcd(url, parsed, timeout, AuthOptions::fromEnv());
  }
  return makeTcpStore(parsed.host, parsed.port, timeout);  // AuthOptions::fromEnv()
}

std::shared_ptr<Store> openStore(const std::string& url, std::chrono::milliseconds timeout,
                                 const AuthOptions& auth) {
  store::StoreUrl parsed = store::parseStoreUrl(url);
  if (parsed.kind == store::StoreUrl::Kind::kFile) return makeFileStore(parsed.path);
  // etcd authenticates through its own TLS (docs/etcd-store.md), not the job key.
  if (parsed.kind == store::StoreUrl::Kind::kEtcd) return openEtcd(url, parsed, timeout, auth);
  return makeTcpStore(parsed.host, parsed.port, timeout, auth);
}

}  // namespace chorus
