// The modes that keep gradients local (LocalSgd, DiLoCo): scaling them, and LocalSgd's periodic
// averaging of the parameters.
#include "dp/replica_impl.h"

#include <algorithm>

namespace chorus::dp {

void Replica::Impl::scaleLocal(float scale) {
  if (scale == 1.0f) return;
  for (Param& p : params) {
    for (size_t j = 0; j < p.count; ++j) p.grad[j] *= scale;
  }
}

void Replica::Impl::averageParameters() {
  std::vector<Work> works(buckets.size());
  for (size_t b = 0; b < buckets.size(); ++b) {
    Bucket& k = buckets[b];
    float* target = k.flat ? k.buffer[0].data() : params[infos[b].params[0]].value;
    if (k.flat) {
      for (size_t i : infos[b].params) {
        const Param& p = params[i];
        std::copy(p.value, p.value + p.count, k.buffer[0].data() + p.offset);
      }
    }
    works[b] = withContext(bucketContext(b, steps) + ", parameter averaging", [&] {
      return comm->allReduce(target, target, k.elements, DataType::kF32, ReduceOp::kAvg);
    });
    current.bytesReduced += k.elements * sizeof(float);
  }
  for (size_t b = 0; b < buckets.size(); ++b) {
    withContext(bucketContext(b, steps) + ", parameter averaging", [&] { works[b].wait(); });
    if (!buckets[b].flat) continue;
    for (size_t i : infos[b].params) {
      Param& p = params[i];
      const float* src = buckets[b].buffer[0].data() + p.offset;
      std::copy(src, src + p.count, p.value);
    }
  }
}

}  // namespace chorus::dp
