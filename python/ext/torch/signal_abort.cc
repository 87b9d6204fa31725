#include "signal_abort.h"

#include <c10/util/intrusive_ptr.h>

#include <cstdio>

namespace chorus::torch_backend {

std::function<void()> abortOnSignal(ProcessGroupChorus* group) {
  c10::weak_intrusive_ptr<ProcessGroupChorus> weak(
      c10::intrusive_ptr<ProcessGroupChorus>::unsafe_reclaim_from_nonowning(group));
  return [weak] {
    auto alive = weak.lock();
    if (!alive) return;
    std::fprintf(stderr,
                 "chorus backend (rank %d): interrupted by a signal while waiting; aborting the "
                 "process group so that its peers fail now\n",
                 alive->getRank());
    alive->abortGroup();
  };
}

}  // namespace chorus::torch_backend
