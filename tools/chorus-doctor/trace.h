// What chorus-doctor reads: the flight recorder's dumps and the live progress records, in the
// formats docs/trace-format.md fixes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chorus::doctor {

// What one call exchanged with one peer so far.
struct PeerIo {
  int rank = -1;
  int64_t sent = 0;
  int64_t received = 0;
  int64_t firstArrivalUs = 0;  // 0: nothing of this call has arrived from the peer yet
};

// One recorded call ("allreduce #5").
struct Entry {
  int64_t number = 0;
  std::string collective;
  std::string algorithm;
  std::string dtype;
  std::string op;
  int64_t count = 0;
  int64_t bytes = 0;
  int root = -1;
  std::string state;  // queued, started, waiting, done, failed
  int waitingOn = -1;
  int64_t issuedUs = 0;
  int64_t startedUs = 0;
  int64_t endedUs = 0;
  std::vector<PeerIo> peers;
  // false: this rank did not follow the call's per-peer traffic (peers is empty, and says
  // nothing about what was exchanged).
  bool detailed = true;

  bool done() const { return state == "done"; }
  // "allreduce #5"
  std::string name() const;
  // "allreduce(f32, sum, 1024)", "broadcast(f32, 1024, root 0)": what a mismatch compares.
  std::string signature() const;
  const PeerIo* peer(int rank) const;
};

// A span the dp layer recorded beside the calls: the backward pass of a step ("compute") or a
// bucket's all-reduce from launch to completion ("bucket").
struct Span {
  std::string kind;
  int64_t step = 0;
  int64_t startUs = 0;
  int64_t endUs = 0;
  int bucket = -1;
  int64_t bytes = 0;
  int64_t call = -1;  // the number of the bucket's all-reduce
  int64_t waitUs = 0;
  int64_t transferUs = 0;
  int lastPeer = -1;
};

// One rank's dump of one communicator.
struct Dump {
  std::string path;
  std::string communicator;
  int rank = -1;
  int size = 0;
  std::string host;
  int64_t pid = 0;
  std::string reason;  // failure, timeout, request, signal
  std::optional<std::string> error;
  int64_t dumpedUs = 0;
  int64_t capacity = 0;
  int64_t recorded = 0;
  std::vector<Entry> entries;  // oldest first
  std::vector<Span> spans;     // oldest first; none in dumps of older writers

  // The entry with this number that is a collective (not a send_recv), or null.
  const Entry* collective(int64_t number) const;
  // The newest collective entry, or null.
  const Entry* lastCollective() const;
};

// Reads one dump file. Throws std::runtime_error naming the file and the problem.
Dump loadDump(const std::string& path);

struct LoadedDumps {
  std::vector<Dump> dumps;
  std::vector<std::string> problems;  // files that matched the name but could not be read
};
// Every chorus-trace-*.json in dir (not its subdirectories), sorted by communicator and rank;
// when a rank left two dumps of one communicator, the newer one. Throws when dir is unreadable.
LoadedDumps loadDumps(const std::string& dir);

// One rank's progress record (key chorus/progress/<communicator>/<rank>).
struct Progress {
  std::string communicator;
  int rank = -1;
  int size = 0;
  std::string host;
  int64_t pid = 0;
  int64_t issued = 0;
  int64_t completed = 0;
  std::string state;  // idle, queued, started, waiting, failed
  // The oldest call not yet done, when state is not idle.
  bool hasCurrent = false;
  int64_t currentNumber = 0;
  std::string currentCollective;
  int currentWaitingOn = -1;
  int64_t currentSinceUs = 0;
  int64_t lastProgressUs = 0;
  int64_t publishedUs = 0;
};

// Parses one record. Throws std::runtime_error when it is not a chorus-progress/1 object.
Progress parseProgress(const std::string& text);

// Wall-clock microseconds since the Unix epoch, as the records use.
int64_t nowUs();

}  // namespace chorus::doctor
