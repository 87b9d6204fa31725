// The store keys of an elastic job that the library and launchers both use, under the job's root
// store (docs/fault-tolerance.md, "Protocol").
#pragma once

#include <cstdint>
#include <string>

namespace chorus::elastic_keys {

inline constexpr const char* kRoot = "chorus/elastic/";
// Added to by a launcher before it starts a replacement.
inline constexpr const char* kExpectedJoinersKey = "chorus/elastic/expected_joiners";
// Written by the new communicator's rank 0 after each membership change.
inline constexpr const char* kLastChangeKey = "chorus/elastic/last_change";
// Written by a launcher that restarts lost ranks (decimal text): how many restarts it has left.
inline constexpr const char* kRestartsLeftKey = "chorus/elastic/restarts_left";
// Written by a launcher that keeps spare processes waiting to join (decimal text): the most
// members a membership change may have. Newcomers past it stay in the queue, not admitted.
inline constexpr const char* kMaxSizeKey = "chorus/elastic/max_size";
// Newcomers' tickets (Store::add), each newcomer's record ("host pid N") and its admission.
inline constexpr const char* kJoinerTicketsKey = "chorus/elastic/joiners";
inline std::string joinerKey(int64_t ticket) {
  return kRoot + std::string("joiner/") + std::to_string(ticket);
}
inline std::string admittedKey(int64_t ticket) {
  return kRoot + std::string("admitted/") + std::to_string(ticket);
}

}  // namespace chorus::elastic_keys
