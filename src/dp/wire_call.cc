#include "dp/wire_call.h"

namespace chorus::dp {

// Until the library has wire formats: the values were rounded by the caller, sent as f32.
Work allReduceAs(Communicator& comm, float* data, size_t count, Compression) {
  return comm.allReduce(data, data, count, DataType::kF32, ReduceOp::kAvg);
}

uint64_t bytesSentBy(const Communicator&) { return 0; }

}  // namespace chorus::dp
