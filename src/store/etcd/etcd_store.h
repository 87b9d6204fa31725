// The store on an etcd v3 cluster (openStore's "etcd://" URLs).
#pragma once

#include <chorus/store.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "store/store_url.h"

namespace chorus::store::etcd {

// Keys live under prefix + "/". Every call that does not wait retries within `timeout`; the
// first read (here) too, so that a cluster no member of which answers fails now, naming them.
std::shared_ptr<Store> makeEtcdStore(std::vector<HostPort> endpoints, const std::string& prefix,
                                     std::chrono::milliseconds timeout);

}  // namespace chorus::store::etcd
