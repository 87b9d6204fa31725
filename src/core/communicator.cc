// The public Communicator: thin methods over its Impl (core/communicator_impl.h).
#include "core/communicator_impl.h"

#include "trace/json_out.h"

#include <chorus/error.hpp>

#include <string>

namespace chorus {

Communicator::Communicator(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

int Communicator::rank() const { return impl_->rank; }
int Communicator::size() const { return impl_->size; }
const Options& Communicator::options() const { return impl_->options; }

std::string Communicator::lastAlgorithm() const {
  int a = impl_->lastAlgo.load(std::memory_order_relaxed);
  return a < 0 ? std::string() : toString(static_cast<AlgorithmId>(a));
}

std::string Communicator::transportTo(int peer) const {
  if (peer < 0 || peer >= impl_->size) {
    throw Error(ErrorCode::kInvalidArgument, "transportTo: rank " + std::to_string(peer) +
                                                 " is not in [0, " + std::to_string(impl_->size) +
                                                 ")");
  }
  if (peer == impl_->rank) return "self";
  return impl_->transport()->pathTo(peer);
}

std::string Communicator::hostOf(int peer) const {
  if (peer < 0 || peer >= impl_->size) {
    throw Error(ErrorCode::kInvalidArgument, "hostOf: rank " + std::to_string(peer) +
                                                 " is not in [0, " + std::to_string(impl_->size) +
                                                 ")");
  }
  if (!impl_->transport()) return impl_->options.hostId;
  return impl_->transport()->hosts().at(static_cast<size_t>(peer));
}

void Communicator::checkSizes(const char* op, size_t expected, size_t got) {
  if (expected != got) {
    throw Error(ErrorCode::kInvalidArgument, std::string(op) + ": output holds " +
                                                 std::to_string(got) + " elements, expected " +
                                                 std::to_string(expected));
  }
}

Work Communicator::allReduce(const void* in, void* out, size_t count, DataType t, ReduceOp op,
                             Run run) {
  return impl_->issue(OpDesc::of(CollectiveKind::kAllReduce, count, t, op, 0), in, out, run);
}
Work Communicator::reduceScatter(const void* in, void* out, size_t n, DataType t, ReduceOp op,
                                 Run run) {
  return impl_->issue(OpDesc::of(CollectiveKind::kReduceScatter, n, t, op, 0), in, out, run);
}
Work Communicator::allGather(const void* in, void* out, size_t n, DataType t, Run run) {
  return impl_->issue(OpDesc::of(CollectiveKind::kAllGather, n, t, ReduceOp::kSum, 0), in, out,
                      run);
}
Work Communicator::broadcast(void* buf, size_t count, DataType t, int root, Run run) {
  return impl_->issue(OpDesc::of(CollectiveKind::kBroadcast, count, t, ReduceOp::kSum, root), buf,
                      buf, run);
}
Work Communicator::barrier(Run run) {
  return impl_->issue(OpDesc::of(CollectiveKind::kBarrier, 0, DataType::kU8, ReduceOp::kSum, 0),
                      nullptr, nullptr, run);
}

void Communicator::abort() { impl_->requestAbort(); }

std::string StragglerReport::summary() const {
  trace::StragglerCopy s;
  s.collectives = collectives;
  for (const auto& q : ranks) {
    s.ranks.push_back({q.rank, q.last, q.lagSamples,
                       static_cast<uint64_t>(q.medianLagMs * 1000.0 + 0.5),
                       static_cast<uint64_t>(q.p99LagMs * 1000.0 + 0.5)});
  }
  return trace::stragglerText(s, seenBy);
}

std::string Communicator::dumpTrace(const std::string& dir) const { return impl_->dumpTrace(dir); }

StragglerReport Communicator::stragglerReport() const {
  StragglerReport out;
  out.seenBy = impl_->rank;
  const trace::StragglerCopy s = impl_->trace().recorder.stragglers(trace::WallClock::now());
  out.collectives = s.collectives;
  for (const auto& q : s.ranks) {
    StragglerReport::Rank row;
    row.rank = q.rank;
    row.last = q.last;
    row.lastFraction =
        s.collectives ? static_cast<double>(q.last) / static_cast<double>(s.collectives) : 0;
    row.lagSamples = q.lagSamples;
    row.medianLagMs = static_cast<double>(q.medianLagUs) / 1000.0;
    row.p99LagMs = static_cast<double>(q.p99LagUs) / 1000.0;
    out.ranks.push_back(row);
  }
  return out;
}
std::exception_ptr Communicator::abortCause() const { return impl_->cause(); }

}  // namespace chorus
