// The in-place collectives of one host (algo/in_place.h). Every rank first sends every other
// rank a description of its buffers (this message is also the sign that the sender entered the
// call, so its input is ready); when every buffer that someone will read is registered and
// mapped, the ranks reduce or copy straight from each other's memory:
//
//   all-reduce:     each rank reduces its block of every rank's input into its own output
//                   (reduce-scatter), a barrier, then copies every other block from the output
//                   of the rank that reduced it (all-gather), and a last barrier;
//   reduce-scatter: the first half of that; all-gather: the second half, from the inputs;
//   broadcast:      every rank copies the root's buffer.
//
// The barriers are what make reading in place safe: nobody writes a buffer that a peer still
// reads (an all-reduce with in == out overwrites its input in the all-gather), and nobody
// returns (after which the application may change or free the buffer) before every reader of
// its buffers is done. Each is a zero-byte message to every peer of the host, so a peer that
// stops answering is named by the transport's wait like any other.
#include "algo/in_place.h"

#include "algo/copy.h"
#include "algo/ring_pattern.h"
#include "reduce/internal_types.h"
#include "reduce/reduce.h"

#include <chorus/error.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

namespace chorus::algo {
namespace {

// Steps of this protocol, far above any algorithm's own (which count up from 0), so that a
// fallback algorithm's messages never look like the exchange's.
constexpr uint32_t kHelloStep = 0x7E000000;
constexpr uint32_t kMappedStep = kHelloStep + 1;
constexpr uint32_t kReducedStep = kHelloStep + 2;
constexpr uint32_t kDoneStep = kHelloStep + 3;
constexpr uint32_t kHelloMagic = 0x43524d31;  // "CRM1"
// Reductions walk the block in pieces that stay in cache between the sources.
constexpr size_t kReduceChunkBytes = 128 * 1024;

std::atomic<uint64_t> inPlaceRuns{0};
constexpr size_t kDefaultMinBytes = size_t{1} << 20;
std::atomic<size_t> minBytes{kDefaultMinBytes};

struct Hello {
  uint32_t magic = kHelloMagic;
  uint32_t flags = 0;  // kInRegistered | kOutRegistered
  SharedRef in;
  SharedRef out;
};
constexpr uint32_t kInRegistered = 1;
constexpr uint32_t kOutRegistered = 2;

bool hasInPlaceForm(CollectiveKind kind) {
  return kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter ||
         kind == CollectiveKind::kAllGather || kind == CollectiveKind::kBroadcast;
}

bool oneHost(const Group& g) {
  const std::vector<std::string>& hosts = g.tx->hosts();
  if (hosts.size() != static_cast<size_t>(g.size)) return false;  // a subgroup's view
  return std::all_of(hosts.begin(), hosts.end(),
                     [&](const std::string& h) { return h == hosts[0]; });
}

// Sends `mine` (bytes) to every peer and receives each peer's into theirs + q * bytes.
void exchange(const Group& g, uint32_t step, const void* mine, size_t bytes, void* theirs) {
  const size_t n = static_cast<size_t>(g.size);
  std::vector<transport::Request>& recvs = g.scratch->recvs(n);
  std::vector<transport::Request>& sends = g.scratch->sends(n);
  auto* in = static_cast<uint8_t*>(theirs);
  for (int q = 0; q < g.size; ++q) {
    if (q != g.rank) g.tx->postRecv(recvs[static_cast<size_t>(q)], q, in + q * bytes, bytes, step);
  }
  for (int q = 0; q < g.size; ++q) {
    if (q != g.rank) g.tx->postSend(sends[static_cast<size_t>(q)], q, mine, bytes, step);
  }
  for (size_t q = 0; q < n; ++q) {
    g.wait(recvs[q]);
    g.wait(sends[q]);
  }
}

void barrier(const Group& g, uint32_t step) { exchange(g, step, nullptr, 0, nullptr); }

// Bytes of the input and the output of one rank.
struct Extents {
  size_t in = 0;
  size_t out = 0;
};
Extents extentsOf(const OpDesc& d, int size) {
  const size_t bytes = d.count * reduce::elementSize(d.dtype);
  const size_t all = bytes * static_cast<size_t>(size);
  switch (d.kind) {
    case CollectiveKind::kReduceScatter:
      return {all, bytes};
    case CollectiveKind::kAllGather:
      return {bytes, all};
    default:
      return {bytes, bytes};
  }
}

// Which of rank q's buffers the others read.
uint32_t neededFrom(const OpDesc& d, int q) {
  switch (d.kind) {
    case CollectiveKind::kAllReduce:
      return kInRegistered | kOutRegistered;
    case CollectiveKind::kBroadcast:
      return q == d.root ? kOutRegistered : 0;
    default:
      return kInRegistered;
  }
}

// dst = op over srcs[0..n) of `count` elements, srcs[0] first (dst may be srcs[0]: this rank's
// own input, which therefore goes first), in cache-sized pieces.
void reduceInto(uint8_t* dst, const std::vector<const uint8_t*>& srcs, size_t count,
                const OpDesc& d, int size) {
  const size_t es = reduce::elementSize(d.dtype);
  const reduce::ReduceFn fn = reduce::reduceFn(d.dtype, d.op);
  const size_t chunk = std::max<size_t>(1, kReduceChunkBytes / es);
  for (size_t at = 0; at < count; at += chunk) {
    const size_t n = std::min(chunk, count - at);
    uint8_t* out = dst + at * es;
    if (srcs.size() == 1) {
      if (out != srcs[0] + at * es) copyBytes(d.dtype, out, srcs[0] + at * es, n * es);
    } else {
      fn(out, srcs[0] + at * es, srcs[1] + at * es, n);
      for (size_t s = 2; s < srcs.size(); ++s) fn(out, out, srcs[s] + at * es, n);
    }
    if (d.op == ReduceOp::kAvg) reduce::divide(out, n, d.dtype, size);
  }
}

// Sources of block `b` (element offset) of every rank's input, this rank's first.
std::vector<const uint8_t*> sourcesOf(const Group& g, const std::vector<const uint8_t*>& ins,
                                      size_t byteOffset) {
  std::vector<const uint8_t*> srcs;
  srcs.reserve(ins.size());
  for (int k = 0; k < g.size; ++k)
    srcs.push_back(ins[static_cast<size_t>((g.rank + k) % g.size)] + byteOffset);
  return srcs;
}

void allReduceInPlace(const Group& g, const OpDesc& d, const std::vector<const uint8_t*>& ins,
                      const std::vector<const uint8_t*>& outs, uint8_t* out) {
  const size_t es = reduce::elementSize(d.dtype);
  const Block mine = balancedBlock(d.count, g.size, g.rank);
  reduceInto(out + mine.offset * es, sourcesOf(g, ins, mine.offset * es), mine.count, d, g.size);
  barrier(g, kReducedStep);  // every block is final, and nobody reads an input any more
  for (int q = 0; q < g.size; ++q) {
    if (q == g.rank) continue;
    const Block b = balancedBlock(d.count, g.size, q);
    copyBytes(d.dtype, out + b.offset * es, outs[static_cast<size_t>(q)] + b.offset * es,
              b.count * es);
  }
}

}  // namespace

bool runInPlace(const Group& g, const Args& a) {
  const OpDesc& d = a.desc;
  if (g.shared == nullptr || g.size < 2 || g.hier != nullptr) return false;
  if (!hasInPlaceForm(d.kind) || !isValid(d.dtype)) return false;
  // A reduced-precision wire format is the ring's: the in-place path would reduce at full
  // precision and give other bits than the call asked for. Every rank agrees on the format.
  if (d.wire != WireFormat::kNative) return false;
  const size_t es = reduce::elementSize(d.dtype);
  if (d.count * es < inPlaceMinBytes() || !oneHost(g)) return false;

  // A broadcast's only buffer is its output (in place on every rank).
  const void* in = d.kind == CollectiveKind::kBroadcast ? a.out : a.in;
  const Extents ext = extentsOf(d, g.size);
  Hello mine;
  if (in != nullptr && g.shared->describe(in, ext.in, mine.in)) mine.flags |= kInRegistered;
  if (a.out != nullptr && g.shared->describe(a.out, ext.out, mine.out)) {
    mine.flags |= kOutRegistered;
  }
  std::vector<Hello> all(static_cast<size_t>(g.size));
  exchange(g, kHelloStep, &mine, sizeof(Hello), all.data());
  all[static_cast<size_t>(g.rank)] = mine;
  for (int q = 0; q < g.size; ++q) {
    const Hello& h = all[static_cast<size_t>(q)];
    const uint32_t need = neededFrom(d, q);
    if (h.magic != kHelloMagic || (h.flags & need) != need) return false;  // the usual path
  }

  // Map what this rank reads; every rank learns whether every rank could.
  std::vector<const uint8_t*> ins(static_cast<size_t>(g.size));
  std::vector<const uint8_t*> outs(static_cast<size_t>(g.size));
  uint8_t mapped = 1;
  for (int q = 0; q < g.size && mapped; ++q) {
    const size_t uq = static_cast<size_t>(q);
    if (q == g.rank) {
      ins[uq] = static_cast<const uint8_t*>(in);
      outs[uq] = static_cast<const uint8_t*>(a.out);
      continue;
    }
    const uint32_t need = neededFrom(d, q);
    std::string why;
    if (need & kInRegistered) ins[uq] = g.shared->map(q, all[uq].in, why);
    if (need & kOutRegistered) outs[uq] = g.shared->map(q, all[uq].out, why);
    if (!why.empty()) mapped = 0;
  }
  std::vector<uint8_t> mappedBy(static_cast<size_t>(g.size));
  exchange(g, kMappedStep, &mapped, 1, mappedBy.data());
  mappedBy[static_cast<size_t>(g.rank)] = mapped;
  if (std::find(mappedBy.begin(), mappedBy.end(), uint8_t{0}) != mappedBy.end()) return false;

  auto* out = static_cast<uint8_t*>(a.out);
  const size_t bytes = d.count * es;
  switch (d.kind) {
    case CollectiveKind::kAllReduce:
      allReduceInPlace(g, d, ins, outs, out);
      break;
    case CollectiveKind::kReduceScatter:
      reduceInto(out, sourcesOf(g, ins, bytes * static_cast<size_t>(g.rank)), d.count, d, g.size);
      break;
    case CollectiveKind::kAllGather:
      for (int q = 0; q < g.size; ++q) {
        const uint8_t* src = ins[static_cast<size_t>(q)];
        uint8_t* dst = out + bytes * static_cast<size_t>(q);
        if (src != dst) moveBytes(d.dtype, dst, src, bytes);
      }
      break;
    case CollectiveKind::kBroadcast:
      if (g.rank != d.root) copyBytes(d.dtype, out, outs[static_cast<size_t>(d.root)], bytes);
      break;
    default:
      throw Error(ErrorCode::kInternal, "no in-place form of " + std::string(toString(d.kind)));
  }
  barrier(g, kDoneStep);  // every reader of this rank's buffers is done with them
  inPlaceRuns.fetch_add(1, std::memory_order_relaxed);
  return true;
}

size_t inPlaceMinBytes() { return minBytes.load(std::memory_order_relaxed); }

void setInPlaceMinBytesForTesting(size_t bytes) {
  minBytes.store(bytes == 0 ? kDefaultMinBytes : bytes, std::memory_order_relaxed);
}

uint64_t inPlaceRunCount() { return inPlaceRuns.load(std::memory_order_relaxed); }

}  // namespace chorus::algo
