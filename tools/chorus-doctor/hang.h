// Who holds up a call that not every rank has finished: the part of the verdict that dumps and
// live progress records share.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::doctor {

enum class RankState {
  kNotEntered,  // has not issued the call (its last call is older)
  kQueued,      // issued, not started
  kWaiting,     // in the call, waiting for waitsFor
  kBusy,        // in the call, waiting on no one
  kCompleted,   // finished the call
  kUnknown,     // no dump or record from this rank
};

struct RankAtCall {
  int rank = -1;
  RankState state = RankState::kUnknown;
  std::vector<int> waitsFor;  // kWaiting: the peers it waits for, best guess first
  double quietSeconds = -1;   // live: how long since it last made progress; -1 when unknown
  // live: its record stopped updating (published longer ago than --stale-seconds), so its
  // state may be out of date.
  bool stale = false;
  // kUnknown: whether a peer saw anything of this call from it (dumps only), and whether that
  // is known (false: some peer did not follow the call's traffic and none reports any).
  bool peersHeardFromIt = false;
  bool heardKnown = true;
};

struct HangPicture {
  std::string call;  // "allreduce #9"
  int64_t number = 0;
  bool live = false;              // wording: "has not issued" (live) or "never entered" (dumps)
  std::vector<RankAtCall> ranks;  // every rank of the communicator, by rank
};

struct HangVerdict {
  std::string verdict;
  std::vector<int> culprits;  // the ranks the verdict names as the cause
  nlohmann::json details;
};

HangVerdict describeHang(const HangPicture& picture);

}  // namespace chorus::doctor
