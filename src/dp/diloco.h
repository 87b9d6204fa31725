// DiLoCo's outer loop (docs/dp.md, "DiLoCo"): every H steps, per fragment of the model, the
// ranks average the pseudo-gradient (anchor - parameters), take an outer SGD step with Nesterov
// momentum on the anchor and continue from it. The anchor and momentum are the same on every rank.
#pragma once

#include <chorus/communicator.hpp>
#include <chorus/dp.hpp>

#include "dp/consistency.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus::dp {

class DiLoCo {
 public:
  // `tensors`: the parameters, in registration order. Throws Error(kInvalidArgument) when there
  // are fewer tensors than fragments.
  DiLoCo(const DiLoCoOptions& o, std::vector<Tensor> tensors);

  // Cuts tensors into `fragments` contiguous groups of about equal element counts (each at
  // least one tensor); returns [first, last) tensor index ranges.
  static std::vector<std::pair<size_t, size_t>> split(const std::vector<size_t>& counts,
                                                      int fragments);

  // anchor = parameters, momentum = 0: at the start and after synchronize().
  void resetAnchor();
  // Fragments that sync once `step` optimizer steps have completed: fragment f when
  // step % H == f * H / F.
  std::vector<int> dueAt(int64_t step) const;
  std::vector<Tensor> tensorsOf(int fragment) const;
  // All-reduces fragment f's pseudo-gradient (avg, blocking) into a buffer of its own; the
  // parameters stay as they are until apply(f). Returns the f32 payload bytes.
  uint64_t reduce(Communicator& comm, int fragment);
  // After reduce(f): max over the fragment's elements of |this rank's pseudo-gradient - the
  // average|, which is how far this rank's parameters are from the ranks' average (the anchor
  // is the same everywhere), measured without sending the parameters.
  double deviation(int fragment) const;
  // After reduce(f): the outer step on the anchor; the parameters become the new anchor.
  void apply(int fragment);
  // reduce(f), then apply(f).
  uint64_t sync(Communicator& comm, int fragment);

  const std::vector<std::pair<size_t, size_t>>& fragments() const { return fragments_; }

 private:
  DiLoCoOptions opt_;
  std::vector<Tensor> tensors_;
  std::vector<std::pair<size_t, size_t>> fragments_;
  std::vector<size_t> offsets_;  // per tensor, into anchor_ / momentum_
  std::vector<float> anchor_, momentum_;
  // This rank's pseudo-gradient and the ranks' average of it (reduce() fills a fragment's part).
  std::vector<float> delta_, average_;

  // The fragment's element range [begin, end) in those buffers.
  std::pair<size_t, size_t> elements(int fragment) const;
};

}  // namespace chorus::dp
