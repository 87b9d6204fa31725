#include "auth/refusal_log.h"

#include "common/net_address.h"

#include <cstdio>
#include <mutex>
#include <set>
#include <tuple>

namespace chorus::auth {
namespace {

std::mutex mu;
std::set<std::tuple<std::string, std::string, std::string>> seen;
bool saidEnough = false;

std::string hostOf(const std::string& address) {
  std::string host;
  int port = 0;
  return net::splitHostPort(address, &host, &port) ? host : address;
}

}  // namespace

void logRefusal(const std::string& what, const std::string& address, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<int>(seen.size()) >= kMaxLogged) {
    if (!saidEnough) {
      std::fprintf(stderr, "chorus: %d refused peers logged; further refusals are not\n",
                   kMaxLogged);
      saidEnough = true;
    }
    return;
  }
  if (!seen.emplace(what, hostOf(address), reason).second) return;
  std::fprintf(stderr, "chorus: %s from %s: %s\n", what.c_str(), address.c_str(), reason.c_str());
}

void forgetRefusals() {
  std::lock_guard<std::mutex> lock(mu);
  seen.clear();
  saidEnough = false;
}

int refusalsLogged() {
  std::lock_guard<std::mutex> lock(mu);
  return static_cast<int>(seen.size());
}

}  // namespace chorus::auth
