#include "signal_abort.h"

#include "process_group_chorus.h"

#include <cstdio>

namespace chorus::torch_backend {

void SignalAbort::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!group_) return;
  std::fprintf(stderr,
               "chorus backend (rank %d): interrupted by a signal while waiting; aborting the "
               "process group so that its peers fail now\n",
               group_->getRank());
  group_->abortGroup();
}

void SignalAbort::detach() {
  std::lock_guard<std::mutex> lock(mu_);
  group_ = nullptr;
}

}  // namespace chorus::torch_backend
