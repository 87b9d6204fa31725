#include "core/roll_call.h"

#include <chorus/error.hpp>

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <sstream>
#include <string>

namespace chorus {
namespace {

// This process, as other ranks will name it ("vm pid 4242"), and a random number that tells two
// processes apart even where pids repeat (containers, hosts with one name).
struct Claimant {
  std::string who;
  uint64_t nonce = 0;
  int size = 0;
};

const Claimant& thisProcess() {
  static const Claimant self = [] {
    Claimant c;
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    c.who = std::string(host) + " pid " + std::to_string(getpid());
    if (getrandom(&c.nonce, sizeof(c.nonce), 0) != sizeof(c.nonce)) {
      c.nonce = std::random_device{}() ^ (static_cast<uint64_t>(getpid()) << 32);
    }
    return c;
  }();
  return self;
}

std::string encode(const Claimant& c) {
  return std::to_string(c.nonce) + " " + std::to_string(c.size) + " " + c.who;
}

Claimant decode(const Store::Bytes& bytes) {
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  Claimant c;
  in >> c.nonce >> c.size;
  std::getline(in >> std::ws, c.who);
  return c;
}

std::string prefixOf(int64_t generation) { return "chorus/" + std::to_string(generation) + "/"; }
std::string claimKey(int64_t generation, int rank) {
  return prefixOf(generation) + "claim/" + std::to_string(rank);
}
std::string conflictKey(int64_t generation) { return prefixOf(generation) + "conflict"; }
std::string joinedKey(int64_t generation) { return prefixOf(generation) + "joined"; }
std::string completeKey(int64_t generation) { return prefixOf(generation) + "complete"; }

std::string text(const Store::Bytes& b) { return std::string(b.begin(), b.end()); }

// Posts the conflict where every rank concerned looks, then raises it here.
[[noreturn]] void raise(Store& root, std::initializer_list<int64_t> generations,
                        const std::string& what) {
  const Store::Bytes bytes(what.begin(), what.end());
  for (int64_t g : generations) {
    if (g >= 1) root.set(conflictKey(g), bytes);
  }
  throw Error(ErrorCode::kInvalidArgument, what);
}

void throwIfConflict(Store& root, int64_t generation) {
  if (root.check({conflictKey(generation)})) {
    throw Error(ErrorCode::kInvalidArgument,
                text(root.get(conflictKey(generation), std::chrono::seconds(5))));
  }
}

// Waits for `key`, in short slices so that a conflict posted meanwhile ends the wait at once.
bool waitForKey(Store& root, int64_t generation, const std::string& key, const Deadline& deadline) {
  auto slice = std::chrono::milliseconds(1);
  while (true) {
    throwIfConflict(root, generation);
    if (deadline.expired()) return root.check({key});
    try {
      root.wait({key},
                std::min(slice, std::chrono::milliseconds(std::max(1, deadline.remainingMs()))));
      return true;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kTimeout) throw;
    }
    slice = std::min(slice * 2, std::chrono::milliseconds(100));
  }
}

std::string ranksText(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

// A process other than this one claimed `rank` in the previous generation: two processes were
// started as one rank, or this store served another job before.
void checkPreviousClaimant(Store& root, int64_t generation, int rank, const Claimant& self) {
  if (generation <= 1) return;
  const std::string key = claimKey(generation - 1, rank);
  // The previous claimant counts first, then writes its claim: give it a moment.
  Store::Bytes bytes;
  try {
    bytes = root.get(key, std::chrono::seconds(2));
  } catch (const Error&) {
    return;
  }
  const Claimant before = decode(bytes);
  if (before.nonce == self.nonce) return;  // this process again: a further communicator
  const bool formed = root.check({completeKey(generation - 1)});
  const std::string r = std::to_string(rank);
  const std::string what =
      formed ? "rank " + r + " already belongs to a job on this store (" + before.who +
                   ", in a world of " + std::to_string(before.size) + " that formed, running or " +
                   "finished), and " + self.who + " claims it again for a world of " +
                   std::to_string(self.size) +
                   ": start each rank once, and give each job a store of its own"
             : "rank " + r + " is claimed by two processes: " + before.who + " and " + self.who +
                   " (worlds of " + std::to_string(before.size) + " and " +
                   std::to_string(self.size) + "): start each rank once";
  raise(root, {generation - 1, generation}, what);
}

}  // namespace

void rollCall(Store& root, int64_t generation, int rank, int size, const Deadline& deadline) {
  Claimant self = thisProcess();
  self.size = size;
  const std::string mine = encode(self);
  root.set(claimKey(generation, rank), Store::Bytes(mine.begin(), mine.end()));
  checkPreviousClaimant(root, generation, rank, self);
  if (root.add(joinedKey(generation), 1) == size) root.set(completeKey(generation), {1});
  // Every world has a rank 0: each other rank compares its world size with rank 0's.
  if (rank != 0 && waitForKey(root, generation, claimKey(generation, 0), deadline)) {
    const Claimant first = decode(root.get(claimKey(generation, 0), std::chrono::seconds(5)));
    if (first.size != size) {
      raise(root, {generation},
            "rank " + std::to_string(rank) + " (" + self.who + ") says the world has " +
                std::to_string(size) + " ranks, rank 0 (" + first.who + ") says " +
                std::to_string(first.size));
    }
  }
  if (waitForKey(root, generation, completeKey(generation), deadline)) {
    // Rank 0 compares every claim with its own size: when it counted the last arrival itself,
    // a rank with another world size may not have raised its conflict yet, and rank 0 would
    // otherwise go on to wait for connections that never come.
    if (rank == 0) {
      std::vector<std::string> keys;
      for (int r = 1; r < size; ++r) keys.push_back(claimKey(generation, r));
      // One request for all the claims where the store can (a round trip per rank otherwise).
      const std::vector<Store::Bytes> claims =
          root.getMany(keys, std::chrono::milliseconds(deadline.remainingMs()));
      for (int r = 1; r < size; ++r) {
        const Claimant other = decode(claims[static_cast<size_t>(r - 1)]);
        if (other.size != size) {
          throwIfConflict(root, generation);  // rank r's own account, when it raised it first
          raise(root, {generation},
                "rank " + std::to_string(r) + " (" + other.who + ") says the world has " +
                    std::to_string(other.size) + " ranks, rank 0 (" + self.who + ") says " +
                    std::to_string(size));
        }
      }
    }
    return;
  }
  std::vector<int> missing;
  for (int r = 0; r < size; ++r) {
    if (!root.check({claimKey(generation, r)})) missing.push_back(r);
  }
  throw Error(ErrorCode::kTimeout, "rank " + std::to_string(rank) + ": timed out waiting for " +
                                       (missing.size() == 1 ? "rank " : "ranks ") +
                                       ranksText(missing) + " to join (" +
                                       std::to_string(size - static_cast<int>(missing.size())) +
                                       " of " + std::to_string(size) + " came)");
}

void checkNoConflict(Store& root, int64_t generation) { throwIfConflict(root, generation); }

}  // namespace chorus
