// Communicator methods of reduce, gather, scatter, all-gather-v, reduce-scatter-v,
// all-to-all(v), send and recv: each builds the call's description (and copies its per-rank counts,
// so a queued call does not depend on the caller's array) and hands it to Impl::issue.
#include "core/communicator_impl.h"

#include <chorus/error.hpp>

#include <string>
#include <vector>

namespace chorus {
namespace {

std::vector<size_t> countsOf(const char* op, const size_t* counts, int size) {
  if (counts == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, std::string(op) + ": counts is null");
  }
  return std::vector<size_t>(counts, counts + size);
}

}  // namespace

void Communicator::checkCounts(const char* op, std::span<const size_t> counts) const {
  if (counts.size() != static_cast<size_t>(size())) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(op) + ": counts hold " + std::to_string(counts.size()) +
                    " entries, expected one per rank (" + std::to_string(size()) + ")");
  }
}

size_t Communicator::sum(std::span<const size_t> counts) {
  size_t total = 0;
  for (size_t c : counts) total += c;
  return total;
}

Work Communicator::allReduce(const void* in, void* out, size_t count, DataType t, ReduceOp op,
                             const CallOptions& call, Run run) {
  OpDesc d = OpDesc::of(CollectiveKind::kAllReduce, count, t, op, 0);
  d.wire = call.wire;
  return impl_->issue(d, in, out, run);
}

uint64_t Communicator::bytesSent() const {
  const transport::Transport* tx = impl_->transport();
  return tx == nullptr ? 0 : tx->bytesSent();
}

Work Communicator::reduce(const void* in, void* out, size_t count, DataType t, ReduceOp op,
                          int root, Run run) {
  return impl_->issue(OpDesc::of(CollectiveKind::kReduce, count, t, op, root), in, out, run);
}

Work Communicator::gather(const void* in, void* out, size_t sendCount, DataType t, int root,
                          Run run) {
  return impl_->issue(OpDesc::of(CollectiveKind::kGather, sendCount, t, ReduceOp::kSum, root), in,
                      out, run);
}

Work Communicator::scatter(const void* in, void* out, size_t recvCount, DataType t, int root,
                           Run run) {
  return impl_->issue(OpDesc::of(CollectiveKind::kScatter, recvCount, t, ReduceOp::kSum, root), in,
                      out, run);
}

Work Communicator::allGatherV(const void* in, void* out, const size_t* counts, DataType t,
                              Run run) {
  const int n = impl_->size;
  algo::Args a{OpDesc::ofCounts(CollectiveKind::kAllGatherV, counts, n, t, ReduceOp::kSum), in,
               out};
  a.counts = countsOf("all_gather_v", counts, n);
  return impl_->issue(std::move(a), run);
}

Work Communicator::reduceScatterV(const void* in, void* out, const size_t* counts, DataType t,
                                  ReduceOp op, Run run) {
  const int n = impl_->size;
  algo::Args a{OpDesc::ofCounts(CollectiveKind::kReduceScatterV, counts, n, t, op), in, out};
  a.counts = countsOf("reduce_scatter_v", counts, n);
  return impl_->issue(std::move(a), run);
}

Work Communicator::allToAll(const void* in, void* out, size_t count, DataType t, Run run) {
  return impl_->issue(OpDesc::of(CollectiveKind::kAllToAll, count, t, ReduceOp::kSum, 0), in, out,
                      run);
}

Work Communicator::allToAllV(const void* in, const size_t* sendCounts, void* out,
                             const size_t* recvCounts, DataType t, Run run) {
  const int n = impl_->size;
  // Each rank's counts are its own: what travels is checked by the receiver's sizes instead.
  algo::Args a{OpDesc::of(CollectiveKind::kAllToAllV, 0, t, ReduceOp::kSum, 0), in, out};
  a.counts = countsOf("all_to_all_v", sendCounts, n);
  a.recvCounts = countsOf("all_to_all_v", recvCounts, n);
  return impl_->issue(std::move(a), run);
}

Work Communicator::send(const void* buf, size_t count, DataType t, int peer, Run run) {
  algo::Args a{OpDesc::of(CollectiveKind::kSendRecv, count, t, ReduceOp::kSum, 0), buf, nullptr};
  a.peer = peer;
  a.sending = true;
  return impl_->issue(std::move(a), run);
}

Work Communicator::recv(void* buf, size_t count, DataType t, int peer, Run run) {
  algo::Args a{OpDesc::of(CollectiveKind::kSendRecv, count, t, ReduceOp::kSum, 0), nullptr, buf};
  a.peer = peer;
  return impl_->issue(std::move(a), run);
}

}  // namespace chorus
