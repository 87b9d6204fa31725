// What a Work of the group runs when a Python signal handler raised (Ctrl-C) while Python's
// main thread waited on it: the group aborts, so its peers fail at once naming this rank rather
// than at their timeout, and this rank's later calls on it fail clearly.
//
// The group owns one and detaches it when destroyed; its Works hold it, not the group, so a Work
// that outlives its group neither keeps the group alive (its destructor would then run on
// whichever thread dropped the last Work) nor reaches it.
#pragma once

#include <functional>
#include <memory>
#include <mutex>

namespace chorus::torch_backend {

class ProcessGroupChorus;

class SignalAbort {
 public:
  explicit SignalAbort(ProcessGroupChorus* group) : group_(group) {}
  // Aborts the group, if it still exists, and says so on stderr.
  void abort();
  // From the group's destructor: later abort() calls do nothing.
  void detach();
  // What WorkChorus::setOnSignal takes.
  static std::function<void()> callback(const std::shared_ptr<SignalAbort>& self) {
    return [self] { self->abort(); };
  }

 private:
  std::mutex mu_;
  ProcessGroupChorus* group_;  // guarded by mu_; null once detached
};

}  // namespace chorus::torch_backend
