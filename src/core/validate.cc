#include "core/validate.h"

#include "algo/group.h"

#include <chorus/error.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace chorus {
namespace {

[[noreturn]] void invalid(const OpDesc& d, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, std::string(toString(d.kind)) + ": " + why);
}

bool overlap(const void* a, size_t an, const void* b, size_t bn) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

}  // namespace

void validateCall(const OpDesc& d, const void* in, const void* out, int rank, int size) {
  if (d.kind == CollectiveKind::kBarrier) return;
  if (!isValid(d.dtype)) invalid(d, "unknown dtype " + std::to_string(static_cast<int>(d.dtype)));
  bool reduces = d.kind == CollectiveKind::kAllReduce || d.kind == CollectiveKind::kReduceScatter;
  if (reduces && !isValid(d.op)) {
    invalid(d, "unknown reduction op " + std::to_string(static_cast<int>(d.op)));
  }
  if (d.wire != WireFormat::kNative) {
    if (!isValid(d.wire)) {
      invalid(d, "unknown wire format " + std::to_string(static_cast<int>(d.wire)));
    }
    const std::string wire = "wire format " + std::string(toString(d.wire));
    if (d.kind != CollectiveKind::kAllReduce) invalid(d, wire + " is for all-reduce only");
    if (d.dtype != DataType::kF32) {
      invalid(d, wire + " needs dtype f32 (got " + std::string(toString(d.dtype)) + ")");
    }
    if (d.op != ReduceOp::kSum && d.op != ReduceOp::kAvg) {
      invalid(d, wire + " needs op sum or avg (got " + std::string(toString(d.op)) + ")");
    }
  }
  if (d.kind == CollectiveKind::kBroadcast && (d.root < 0 || d.root >= size)) {
    invalid(d, "root " + std::to_string(d.root) + " is not a rank of this communicator (size " +
                   std::to_string(size) + ")");
  }
  const size_t esize = sizeOf(d.dtype);
  const size_t n = static_cast<size_t>(size);
  bool blocks = d.kind == CollectiveKind::kReduceScatter || d.kind == CollectiveKind::kAllGather;
  if (d.count > std::numeric_limits<size_t>::max() / esize / (blocks ? n : 1)) {
    invalid(d, "count " + std::to_string(d.count) + " is too large");
  }
  if (d.count == 0) return;
  if (d.kind == CollectiveKind::kBroadcast) {
    if (out == nullptr) invalid(d, "buffer is null with count " + std::to_string(d.count));
    return;
  }
  if (in == nullptr) invalid(d, "send buffer is null with count " + std::to_string(d.count));
  if (out == nullptr) invalid(d, "receive buffer is null with count " + std::to_string(d.count));
  const size_t bytes = d.count * esize;
  switch (d.kind) {
    case CollectiveKind::kAllReduce:
      if (in != out && overlap(in, bytes, out, bytes)) {
        invalid(d, "send and receive buffers overlap (in place means sendbuf == recvbuf)");
      }
      break;
    case CollectiveKind::kReduceScatter: {
      auto inPlace = static_cast<const uint8_t*>(in) + bytes * static_cast<size_t>(rank);
      if (out != inPlace && overlap(in, bytes * n, out, bytes)) {
        invalid(d, "buffers overlap (in place means recvbuf == sendbuf + rank * recvcount)");
      }
      break;
    }
    case CollectiveKind::kAllGather: {
      auto inPlace = static_cast<const uint8_t*>(out) + bytes * static_cast<size_t>(rank);
      if (in != inPlace && overlap(in, bytes, out, bytes * n)) {
        invalid(d, "buffers overlap (in place means sendbuf == recvbuf + rank * sendcount)");
      }
      break;
    }
    default:
      break;
  }
}

namespace {

[[noreturn]] void invalidKind(CollectiveKind kind, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, std::string(toString(kind)) + ": " + why);
}

// Sum of per-rank counts in bytes; throws when it does not fit in a size_t.
size_t totalBytes(CollectiveKind kind, const std::vector<size_t>& counts, size_t esize, int size,
                  const char* which) {
  if (counts.size() != static_cast<size_t>(size)) {
    invalidKind(kind, std::string(which) + " holds " + std::to_string(counts.size()) +
                          " entries, expected one per rank (" + std::to_string(size) + ")");
  }
  const size_t limit = std::numeric_limits<size_t>::max() / esize;
  size_t total = 0;
  for (size_t c : counts) {
    if (c > limit - total) invalidKind(kind, std::string(which) + " add up to too many elements");
    total += c;
  }
  return total * esize;
}

size_t offsetOf(const std::vector<size_t>& counts, int rank, size_t esize) {
  size_t at = 0;
  for (int q = 0; q < rank; ++q) at += counts[static_cast<size_t>(q)];
  return at * esize;
}

void needBuffer(CollectiveKind kind, const void* p, size_t bytes, const char* which) {
  if (p == nullptr && bytes > 0) {
    invalidKind(kind, std::string(which) + " is null with " + std::to_string(bytes) + " bytes");
  }
}

// `part` may be `whole`'s in-place position `inPlace`; any other overlap is an error.
void apartOrInPlace(CollectiveKind kind, const void* part, size_t partBytes, const void* whole,
                    size_t wholeBytes, const void* inPlace, const char* rule) {
  if (part != inPlace && overlap(part, partBytes, whole, wholeBytes)) {
    invalidKind(kind, std::string("buffers overlap (in place means ") + rule + ")");
  }
}

void checkRoot(const OpDesc& d, int size) {
  if (d.root < 0 || d.root >= size) {
    invalid(d, "root " + std::to_string(d.root) + " is not a rank of this communicator (size " +
                   std::to_string(size) + ")");
  }
}

}  // namespace

void validateArgs(const algo::Args& a, int rank, int size) {
  const OpDesc& d = a.desc;
  if (d.kind <= CollectiveKind::kBarrier) return validateCall(d, a.in, a.out, rank, size);
  if (d.wire != WireFormat::kNative) invalid(d, "wire formats are for all-reduce only");
  if (!isValid(d.dtype)) invalid(d, "unknown dtype " + std::to_string(static_cast<int>(d.dtype)));
  const bool reduces =
      d.kind == CollectiveKind::kReduce || d.kind == CollectiveKind::kReduceScatterV;
  if (reduces && !isValid(d.op)) {
    invalid(d, "unknown reduction op " + std::to_string(static_cast<int>(d.op)));
  }
  const size_t es = sizeOf(d.dtype);
  const size_t n = static_cast<size_t>(size);
  const auto* in = static_cast<const uint8_t*>(a.in);
  const auto* out = static_cast<const uint8_t*>(a.out);
  auto fits = [&](size_t blocks) {
    if (d.count > std::numeric_limits<size_t>::max() / es / blocks) {
      invalid(d, "count " + std::to_string(d.count) + " is too large");
    }
    return static_cast<size_t>(d.count) * es;
  };
  switch (d.kind) {
    case CollectiveKind::kReduce: {
      checkRoot(d, size);
      const size_t bytes = fits(1);
      needBuffer(d.kind, in, bytes, "send buffer");
      if (rank != d.root) return;  // the receive buffer is the root's only
      needBuffer(d.kind, out, bytes, "receive buffer");
      apartOrInPlace(d.kind, in, bytes, out, bytes, out, "sendbuf == recvbuf");
      return;
    }
    case CollectiveKind::kGather: {
      checkRoot(d, size);
      const size_t bytes = fits(n);
      needBuffer(d.kind, in, bytes, "send buffer");
      if (rank != d.root) return;
      needBuffer(d.kind, out, bytes * n, "receive buffer");
      apartOrInPlace(d.kind, in, bytes, out, bytes * n, out + bytes * static_cast<size_t>(rank),
                     "sendbuf == recvbuf + root * sendcount");
      return;
    }
    case CollectiveKind::kScatter: {
      checkRoot(d, size);
      const size_t bytes = fits(n);
      needBuffer(d.kind, out, bytes, "receive buffer");
      if (rank != d.root) return;
      needBuffer(d.kind, in, bytes * n, "send buffer");
      apartOrInPlace(d.kind, out, bytes, in, bytes * n, in + bytes * static_cast<size_t>(rank),
                     "recvbuf == sendbuf + root * recvcount");
      return;
    }
    case CollectiveKind::kAllGatherV: {
      const size_t total = totalBytes(d.kind, a.counts, es, size, "counts");
      const size_t mine = a.counts[static_cast<size_t>(rank)] * es;
      needBuffer(d.kind, in, mine, "send buffer");
      needBuffer(d.kind, out, total, "receive buffer");
      apartOrInPlace(d.kind, in, mine, out, total, out + offsetOf(a.counts, rank, es),
                     "sendbuf == recvbuf + the counts of the ranks before this one");
      return;
    }
    case CollectiveKind::kReduceScatterV: {
      const size_t total = totalBytes(d.kind, a.counts, es, size, "counts");
      const size_t mine = a.counts[static_cast<size_t>(rank)] * es;
      needBuffer(d.kind, in, total, "send buffer");
      needBuffer(d.kind, out, mine, "receive buffer");
      apartOrInPlace(d.kind, out, mine, in, total, in + offsetOf(a.counts, rank, es),
                     "recvbuf == sendbuf + the counts of the ranks before this one");
      return;
    }
    case CollectiveKind::kAllToAll: {
      const size_t bytes = fits(n) * n;
      needBuffer(d.kind, in, bytes, "send buffer");
      needBuffer(d.kind, out, bytes, "receive buffer");
      apartOrInPlace(d.kind, in, bytes, out, bytes, out, "sendbuf == recvbuf");
      return;
    }
    case CollectiveKind::kAllToAllV: {
      const size_t sent = totalBytes(d.kind, a.counts, es, size, "send counts");
      const size_t received = totalBytes(d.kind, a.recvCounts, es, size, "receive counts");
      needBuffer(d.kind, in, sent, "send buffer");
      needBuffer(d.kind, out, received, "receive buffer");
      const auto self = static_cast<size_t>(rank);
      if (a.counts[self] != a.recvCounts[self]) {
        invalid(d, "this rank sends itself " + std::to_string(a.counts[self]) +
                       " elements but receives " + std::to_string(a.recvCounts[self]));
      }
      if (overlap(in, sent, out, received)) {
        invalid(d, "send and receive buffers overlap (all_to_all_v has no in-place form)");
      }
      return;
    }
    case CollectiveKind::kSendRecv: {
      if (a.peer < 0 || a.peer >= size || a.peer == rank) {
        invalid(d, "peer " + std::to_string(a.peer) + " is not another rank of this communicator " +
                       "(rank " + std::to_string(rank) + " of " + std::to_string(size) + ")");
      }
      needBuffer(d.kind, a.sending ? in : out, fits(1), "buffer");
      return;
    }
    default:
      invalid(d, "unknown collective");
  }
}

}  // namespace chorus
