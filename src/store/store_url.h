// Store URLs ("tcp://host:port", "file:///abs/path") taken apart without opening anything, so that
// the parsing can be checked on its own.
#pragma once

#include <string>

namespace chorus::store {

struct StoreUrl {
  enum class Kind { kTcp, kFile };
  Kind kind = Kind::kTcp;
  std::string host;  // kTcp: a name or an address, IPv6 without brackets
  int port = 0;      // kTcp: 1-65535
  std::string path;  // kFile: absolute
};

// Throws Error(kInvalidArgument): "openStore: bad store URL "<url>": <what is wrong>".
StoreUrl parseStoreUrl(const std::string& url);

}  // namespace chorus::store
