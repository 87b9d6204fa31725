// Replica::finalize: the parameters' layout in buckets, their buffers and codecs.
#include "dp/bucket_plan.h"
#include "dp/replica_impl.h"
#include "dp/wire_call.h"

#include <algorithm>

namespace chorus::dp {

void Replica::finalize() {
  Impl& m = *impl_;
  if (m.finalized) throw invalid("finalize called twice");
  std::vector<size_t> bytes;
  for (const Param& p : m.params) bytes.push_back(p.count * sizeof(float));
  size_t total = 0;
  for (size_t b : bytes) total += b;
  size_t cap = m.opt.bucketBytes;
  if (m.opt.minBuckets > 0) {
    cap = std::min(cap, std::max<size_t>(1, total / static_cast<size_t>(m.opt.minBuckets)));
  }
  const CompressionOptions& c = m.opt.compression;
  auto canCompress = [&](size_t i) {
    return compressible(c, m.params[i].shape, m.params[i].count);
  };
  // Registered buckets on one host are all-reduced in place (read from the peers' buffers).
  // Not compressed buckets: a wire format is applied by the ring, which the in-place path
  // bypasses. Not in elastic mode: a membership change replaces the communicator the buffers
  // were allocated through, and gradients held in a bucket must keep their address.
  const bool registered =
      c.kind == Compression::kNone && !m.elastic() && sharesHostWithAll(*m.comm);
  // Gradients held by the Replica outside the buckets (the modes other than Sync).
  for (Param& p : m.params) {
    if (!p.heldByReplica || m.opt.mode == Mode::kSync) continue;
    p.gradStore.assign(p.count, 0.0f);
    p.grad = p.gradStore.data();
  }
  for (auto& members : planBuckets(bytes, cap)) {
    Bucket k;
    BucketInfo info;
    // The compressed tensors first: a rounding codec sends them as one run in the wire format.
    if (c.kind != Compression::kNone)
      std::stable_partition(members.begin(), members.end(), canCompress);
    std::vector<CodecTensor> tensors;
    for (size_t i : members) {
      m.params[i].bucket = m.buckets.size();
      m.params[i].offset = k.elements;
      tensors.push_back({k.elements, m.params[i].count, m.params[i].shape});
      k.elements += m.params[i].count;
    }
    info.params = std::move(members);
    info.bytes = k.elements * sizeof(float);
    info.fused = info.params.size() > 1;
    // Sync reduces where backward accumulated the gradients it holds; Delayed reduces copies
    // (the next step's backward writes the gradients while this step's average flies).
    const bool holds = m.opt.mode == Mode::kSync &&
                       std::any_of(info.params.begin(), info.params.end(),
                                   [&](size_t i) { return m.params[i].heldByReplica; });
    k.flat = info.fused || m.opt.mode == Mode::kDelayed || holds;
    if (k.flat) {
      const int copies = m.opt.mode == Mode::kDelayed ? 2 : 1;
      for (int s = 0; s < copies; ++s) k.buffer[s].allocate(*m.comm, k.elements, registered);
      for (size_t i : info.params) {
        Param& p = m.params[i];
        if (holds && p.heldByReplica) p.grad = k.buffer[0].data() + p.offset;
      }
    }
    // Sync and Delayed send gradients (validate() rejects compression in the other modes).
    k.codec = BucketCodec::make(c, std::move(tensors), m.buckets.size() + 1);
    m.buckets.push_back(std::move(k));
    m.infos.push_back(std::move(info));
  }
  if (m.opt.mode == Mode::kDiLoCo) m.diloco = std::make_unique<DiLoCo>(m.opt.diloco, m.values());
  m.finalized = true;
}

}  // namespace chorus::dp
