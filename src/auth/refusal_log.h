// One line on stderr per refused peer address and reason, however often it retries: a scanner
// or a misconfigured job cannot flood the log (after kMaxLogged distinct lines, one more says
// that further refusals go unlogged).
#pragma once

#include <string>

namespace chorus::auth {

inline constexpr int kMaxLogged = 256;

// "chorus: <what> from <address>: <reason>", e.g. what = "authentication failed". The address
// is "ip:port"; repeats are recognised by ip, what and reason.
void logRefusal(const std::string& what, const std::string& address, const std::string& reason);

// Lines logged so far, and forgetting them so that the next refusal of each kind is logged
// again (for tests).
int refusalsLogged();
void forgetRefusals();

}  // namespace chorus::auth
