#include "dp/wire_call.h"

namespace chorus::dp {
namespace {

WireFormat wireOf(Compression kind) {
  switch (kind) {
    case Compression::kBf16:
      return WireFormat::kBf16;
    case Compression::kFp16:
      return WireFormat::kFp16;
    case Compression::kInt8:
      return WireFormat::kInt8Block;
    case Compression::kNone:
    case Compression::kPowerSgd:
      break;
  }
  return WireFormat::kNative;
}

}  // namespace

Work allReduceAs(Communicator& comm, float* data, size_t count, Compression kind) {
  CallOptions call;
  call.wire = wireOf(kind);
  return comm.allReduce(data, data, count, DataType::kF32, ReduceOp::kAvg, call);
}

uint64_t bytesSentBy(const Communicator& comm) { return comm.bytesSent(); }

}  // namespace chorus::dp
