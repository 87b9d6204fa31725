// The store on an etcd v3 cluster (openStore's "etcd://" URLs).
#pragma once

#include <chorus/options.hpp>
#include <chorus/store.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "store/etcd/http_client.h"
#include "store/store_url.h"

namespace chorus::store::etcd {

// Keys live under prefix + "/". Every call that does not wait retries within `timeout`; the
// first read (here) too, so that a cluster no member of which answers fails now, naming them.
// https: the members serve HTTPS, verified with tls.ca (empty: the system's CAs), and this client
// shows tls.cert/tls.key when given.
std::shared_ptr<Store> makeEtcdStore(std::vector<HostPort> endpoints, const std::string& prefix,
                                     std::chrono::milliseconds timeout, bool https = false,
                                     TlsFiles tls = {});

// openStore's etcd:// and etcds:// URLs: the TLS files come from auth.etcd*File (CHORUS_ETCD_CA,
// CHORUS_ETCD_CERT and CHORUS_ETCD_KEY; etcds:// only; Error(kInvalidArgument) when set for
// etcd://, when a certificate comes without its key, or when a file cannot be read).
std::shared_ptr<Store> openEtcdStore(const StoreUrl& url, std::chrono::milliseconds timeout,
                                     const AuthOptions& auth);

}  // namespace chorus::store::etcd
