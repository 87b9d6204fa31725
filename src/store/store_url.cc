#include "store/store_url.h"

#include <chorus/error.hpp>

#include <string_view>

namespace chorus::store {
namespace {

[[noreturn]] void badUrl(const std::string& url, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, "openStore: bad store URL \"" + url + "\": " + why);
}

}  // namespace

StoreUrl parseStoreUrl(const std::string& url) {
  std::string_view u = url;
  constexpr std::string_view kTcp = "tcp://";
  constexpr std::string_view kFile = "file://";
  if (u.substr(0, kTcp.size()) == kTcp) {
    std::string_view rest = u.substr(kTcp.size());
    if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);  // tolerate "tcp://h:p/"
    std::string_view host;
    std::string_view port;
    if (!rest.empty() && rest.front() == '[') {  // [IPv6]:port
      size_t close = rest.find(']');
      if (close == std::string_view::npos) badUrl(url, "unterminated '[' in host");
      host = rest.substr(1, close - 1);
      std::string_view after = rest.substr(close + 1);
      if (after.empty() || after.front() != ':') badUrl(url, "expected tcp://host:port");
      port = after.substr(1);
    } else {
      size_t colon = rest.rfind(':');
      if (colon == std::string_view::npos) badUrl(url, "missing port, expected tcp://host:port");
      host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
      if (host.find(':') != std::string_view::npos) {
        badUrl(url, "IPv6 addresses must be in brackets, as tcp://[addr]:port");
      }
    }
    if (host.empty()) badUrl(url, "missing host, expected tcp://host:port");
    if (host.find_first_of("/?#@ ") != std::string_view::npos) badUrl(url, "bad host");
    if (port.empty()) badUrl(url, "missing port, expected tcp://host:port");
    if (port.size() > 5) badUrl(url, "port out of range 1-65535");
    int value = 0;
    for (char ch : port) {
      if (ch < '0' || ch > '9') badUrl(url, "port is not a number");
      value = value * 10 + (ch - '0');
    }
    if (value < 1 || value > 65535) badUrl(url, "port out of range 1-65535");
    StoreUrl parsed;
    parsed.host = std::string(host);
    parsed.port = value;
    return parsed;
  }
  if (u.substr(0, kFile.size()) == kFile) {
    std::string_view path = u.substr(kFile.size());
    if (path.empty() || path.front() != '/') {
      badUrl(url, "expected an absolute path, as file:///path");
    }
    StoreUrl parsed;
    parsed.kind = StoreUrl::Kind::kFile;
    parsed.path = std::string(path);
    return parsed;
  }
  badUrl(url, "expected tcp://host:port or file:///path");
}

}  // namespace chorus::store
