#include "store/store_url.h"

#include <chorus/error.hpp>

#include <string_view>

namespace chorus::store {
namespace {

[[noreturn]] void badUrl(const std::string& url, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, "openStore: bad store URL \"" + url + "\": " + why);
}

// "host:port", "[v6]:port", or without ":port" when defaultPort > 0.
HostPort parseHostPort(const std::string& url, std::string_view rest, std::string_view expected,
                       int defaultPort) {
  std::string_view host;
  std::string_view port;
  bool hasPort = true;
  if (!rest.empty() && rest.front() == '[') {  // [IPv6]:port
    size_t close = rest.find(']');
    if (close == std::string_view::npos) badUrl(url, "unterminated '[' in host");
    host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (after.empty() && defaultPort > 0) {
      hasPort = false;
    } else {
      if (after.empty() || after.front() != ':') badUrl(url, "expected " + std::string(expected));
      port = after.substr(1);
    }
  } else {
    size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) {
      if (defaultPort == 0) badUrl(url, "missing port, expected " + std::string(expected));
      host = rest;
      hasPort = false;
    } else {
      host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
    }
    if (host.find(':') != std::string_view::npos) {
      badUrl(url, "IPv6 addresses must be in brackets, as [addr]:port");
    }
  }
  if (host.empty()) badUrl(url, "missing host, expected " + std::string(expected));
  if (host.find_first_of("/?#@ ,") != std::string_view::npos) badUrl(url, "bad host");
  if (!hasPort) return HostPort{std::string(host), defaultPort};
  if (port.empty()) badUrl(url, "missing port, expected " + std::string(expected));
  if (port.size() > 5) badUrl(url, "port out of range 1-65535");
  int value = 0;
  for (char ch : port) {
    if (ch < '0' || ch > '9') badUrl(url, "port is not a number");
    value = value * 10 + (ch - '0');
  }
  if (value < 1 || value > 65535) badUrl(url, "port out of range 1-65535");
  return HostPort{std::string(host), value};
}

// "etcd://h1:2379,h2:2379/prefix": the members, then an optional key prefix.
StoreUrl parseEtcdUrl(const std::string& url, std::string_view rest, bool tls) {
  constexpr std::string_view kExpected = "etcd://host:port,host:port/prefix";
  StoreUrl parsed;
  parsed.kind = StoreUrl::Kind::kEtcd;
  parsed.tls = tls;
  size_t slash = rest.find('/');
  std::string_view members = rest.substr(0, slash);
  std::string_view prefix = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  if (!prefix.empty() && prefix.front() == '/') badUrl(url, "empty component in the key prefix");
  if (prefix.find("//") != std::string_view::npos) {
    badUrl(url, "empty component in the key prefix");
  }
  parsed.path = prefix.empty() ? kDefaultEtcdPrefix : std::string(prefix);
  if (members.empty()) badUrl(url, "no etcd member, expected " + std::string(kExpected));
  size_t start = 0;
  for (;;) {
    size_t comma = members.find(',', start);
    std::string_view one =
        members.substr(start, comma == std::string_view::npos ? comma : comma - start);
    if (one.empty()) badUrl(url, "empty etcd member in the list");
    parsed.endpoints.push_back(parseHostPort(url, one, kExpected, kDefaultEtcdPort));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return parsed;
}

}  // namespace

StoreUrl parseStoreUrl(const std::string& url) {
  std::string_view u = url;
  constexpr std::string_view kTcp = "tcp://";
  constexpr std::string_view kFile = "file://";
  constexpr std::string_view kEtcd = "etcd://";
  constexpr std::string_view kEtcds = "etcds://";
  if (u.substr(0, kTcp.size()) == kTcp) {
    std::string_view rest = u.substr(kTcp.size());
    if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);  // tolerate "tcp://h:p/"
    HostPort hp = parseHostPort(url, rest, "tcp://host:port", 0);
    StoreUrl parsed;
    parsed.host = hp.host;
    parsed.port = hp.port;
    return parsed;
  }
  if (u.substr(0, kEtcd.size()) == kEtcd) return parseEtcdUrl(url, u.substr(kEtcd.size()), false);
  if (u.substr(0, kEtcds.size()) == kEtcds) return parseEtcdUrl(url, u.substr(kEtcds.size()), true);
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
  badUrl(url, "expected tcp://host:port, file:///path or etcd[s]://host:port,host:port/prefix");
}

}  // namespace chorus::store
