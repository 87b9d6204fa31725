// chorus-run --hang-seconds: reads the ranks' progress records from the store; when no rank made
// progress for the given time while a call is pending, asks every rank to dump its trace
// (SIGUSR1), prints the doctor's verdict from the dumps and, with --hang-action stop, stops the
// job.
#pragma once

#include <chorus/store.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "supervisor.h"

namespace chorus::launcher {

// A directory for the ranks' dumps: CHORUS_TRACE_DIR when the launcher's environment has it
// (created when missing), else a new one under $TMPDIR (or /tmp).
std::string makeTraceDir();

class HangWatch {
 public:
  // auth: the key the watch's store client proves.
  HangWatch(std::string storeUrl, chorus::AuthOptions auth, double hangSeconds,
            std::string traceDir, bool stopOnHang, Supervisor& supervisor);
  // Called by the supervisor about every kTickPeriod.
  void tick();

  static constexpr std::chrono::milliseconds kTickPeriod{250};

 private:
  using Clock = std::chrono::steady_clock;
  void readRecords();
  void awaitDumps();
  void printVerdict();

  std::string storeUrl_;
  chorus::AuthOptions auth_;
  double hangSeconds_;
  std::string traceDir_;
  bool stopOnHang_;
  Supervisor& supervisor_;
  std::shared_ptr<Store> store_;
  int64_t startedUs_;  // wall clock at the launch, as the records' times
  Clock::time_point nextRead_;
  // The hang being handled: its communicator, size and the progress time it was seen at (a new
  // hang needs progress past it).
  std::string hungCommunicator_;
  int hungSize_ = 0;
  int64_t hungAtProgressUs_ = -1;
  std::string hungSummary_;
  bool awaiting_ = false;
  int64_t signalledUs_ = 0;
  Clock::time_point dumpDeadline_;
};

}  // namespace chorus::launcher
