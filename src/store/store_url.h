// Store URLs ("tcp://host:port", "file:///abs/path", "etcd://host:port,host:port/prefix") taken
// apart without opening anything, so that the parsing can be checked on its own.
#pragma once

#include <string>
#include <vector>

namespace chorus::store {

struct HostPort {
  std::string host;  // a name or an address, IPv6 without brackets
  int port = 0;      // 1-65535
};

struct StoreUrl {
  enum class Kind { kTcp, kFile, kEtcd };
  Kind kind = Kind::kTcp;
  std::string host;  // kTcp: a name or an address, IPv6 without brackets
  int port = 0;      // kTcp: 1-65535
  std::string path;  // kFile: absolute; kEtcd: the key prefix, without leading or trailing '/'
  std::vector<HostPort> endpoints;  // kEtcd: the members, in the order given
  bool tls = false;                 // kEtcd: "etcds://", the members serve HTTPS
};

// The prefix of an etcd:// URL without one: every key of the job lives under "chorus/".
inline constexpr const char* kDefaultEtcdPrefix = "chorus";
// The port of an etcd member given without one (etcd's client port).
inline constexpr int kDefaultEtcdPort = 2379;

// Throws Error(kInvalidArgument): "openStore: bad store URL "<url>": <what is wrong>".
StoreUrl parseStoreUrl(const std::string& url);

}  // namespace chorus::store
