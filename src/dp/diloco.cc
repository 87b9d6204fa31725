#include "dp/diloco.h"

#include <algorithm>

namespace chorus::dp {

std::vector<std::pair<size_t, size_t>> DiLoCo::split(const std::vector<size_t>& counts,
                                                     int fragments) {
  const auto n = counts.size();
  const auto f = static_cast<size_t>(fragments);
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::vector<std::pair<size_t, size_t>> out;
  size_t start = 0, sum = 0;
  for (size_t i = 0; i < n; ++i) {
    sum += counts[i];
    const size_t closed = out.size();
    if (closed + 1 == f) break;  // the last fragment takes the rest
    const size_t tensorsLeft = n - i - 1, fragmentsLeft = f - closed - 1;
    // Close the fragment at the tensor boundary nearest its share of the elements, unless the
    // remaining fragments need every remaining tensor.
    const double target =
        static_cast<double>(total) * static_cast<double>(closed + 1) / static_cast<double>(f);
    const auto here = static_cast<double>(sum);
    const double withNext = i + 1 < n ? here + static_cast<double>(counts[i + 1]) : here;
    const bool nearest = here >= target || withNext - target > target - here;
    if ((nearest && tensorsLeft >= fragmentsLeft) || tensorsLeft == fragmentsLeft) {
      out.emplace_back(start, i + 1);
      start = i + 1;
    }
  }
  out.emplace_back(start, n);
  return out;
}

DiLoCo::DiLoCo(const DiLoCoOptions& o, std::vector<Tensor> tensors)
    : opt_(o), tensors_(std::move(tensors)) {
  if (tensors_.size() < static_cast<size_t>(opt_.fragments)) {
    throw Error(ErrorCode::kInvalidArgument,
                "dp: diloco.fragments (" + std::to_string(opt_.fragments) +
                    ") exceeds the number of parameters (" + std::to_string(tensors_.size()) + ")");
  }
  std::vector<size_t> counts;
  size_t total = 0;
  for (const Tensor& t : tensors_) {
    counts.push_back(t.count);
    offsets_.push_back(total);
    total += t.count;
  }
  fragments_ = split(counts, opt_.fragments);
  anchor_.resize(total);
  momentum_.resize(total);
  delta_.resize(total);
  average_.resize(total);
  resetAnchor();
}

void DiLoCo::resetAnchor() {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    std::copy(tensors_[i].data, tensors_[i].data + tensors_[i].count,
              anchor_.begin() + long(offsets_[i]));
  }
  std::fill(momentum_.begin(), momentum_.end(), 0.0f);
}

std::vector<int> DiLoCo::dueAt(int64_t step) const {
  std::vector<int> due;
  const int64_t h = opt_.syncEvery, f = opt_.fragments;
  for (int64_t i = 0; i < f; ++i) {
    if (step % h == i * h / f) due.push_back(static_cast<int>(i));
  }
  return due;
}

std::vector<Tensor> DiLoCo::tensorsOf(int fragment) const {
  const auto [first, last] = fragments_[static_cast<size_t>(fragment)];
  return {tensors_.begin() + long(first), tensors_.begin() + long(last)};
}

std::pair<size_t, size_t> DiLoCo::elements(int fragment) const {
  const auto [first, last] = fragments_[static_cast<size_t>(fragment)];
  return {offsets_[first], last < tensors_.size() ? offsets_[last] : anchor_.size()};
}

uint64_t DiLoCo::reduce(Communicator& comm, int fragment) {
  const auto [first, last] = fragments_[static_cast<size_t>(fragment)];
  const auto [begin, end] = elements(fragment);
  for (size_t i = first; i < last; ++i) {
    const Tensor& t = tensors_[i];
    for (size_t j = 0; j < t.count; ++j) {
      const size_t k = offsets_[i] + j;
      delta_[k] = anchor_[k] - t.data[j];
    }
  }
  // Out of place: this rank's own pseudo-gradient stays for deviation().
  comm.allReduce(delta_.data() + begin, average_.data() + begin, end - begin, DataType::kF32,
                 ReduceOp::kAvg)
      .wait();
  return (end - begin) * sizeof(float);
}

double DiLoCo::deviation(int fragment) const {
  const auto [begin, end] = elements(fragment);
  return largestDeviation(delta_.data() + begin, average_.data() + begin, end - begin);
}

void DiLoCo::apply(int fragment) {
  const auto [first, last] = fragments_[static_cast<size_t>(fragment)];
  const auto [begin, end] = elements(fragment);
  const auto lr = static_cast<float>(opt_.outerLr);
  const auto mu = static_cast<float>(opt_.outerMomentum);
  for (size_t k = begin; k < end; ++k) {
    const float d = average_[k];
    float& m = momentum_[k];
    m = mu * m + d;
    anchor_[k] -= lr * (opt_.nesterov ? d + mu * m : m);
  }
  for (size_t i = first; i < last; ++i) {
    const Tensor& t = tensors_[i];
    std::copy(anchor_.begin() + long(offsets_[i]), anchor_.begin() + long(offsets_[i] + t.count),
              t.data);
  }
}

uint64_t DiLoCo::sync(Communicator& comm, int fragment) {
  const uint64_t bytes = reduce(comm, fragment);
  apply(fragment);
  return bytes;
}

}  // namespace chorus::dp
