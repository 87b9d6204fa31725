#include "core/validate.h"

#include <chorus/error.hpp>

#include <cstdint>
#include <limits>

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

}  // namespace chorus
