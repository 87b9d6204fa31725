// synchronize(): the replicas agree on the most advanced one and copy its state to the others,
// unless a hash of every rank's content shows that they hold the same bits already.
#include "dp/replica_impl.h"

#include <cstdio>
#include <cstring>
#include <exception>

namespace chorus::dp {
namespace {

// FNV-1a over the names, types and sizes of what is registered: ranks that registered different
// things must not exchange buffers (the broadcasts would mismatch or, worse, match by accident).
uint64_t layoutHash(const std::vector<Param>& params, const std::vector<ExtraState>& extra) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](const void* data, size_t n) {
    const auto* b = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  };
  for (const Param& p : params) {
    mix(p.name.data(), p.name.size());
    mix(&p.count, sizeof p.count);
  }
  for (const ExtraState& e : extra) {
    mix(e.name.data(), e.name.size());
    mix(&e.count, sizeof e.count);
    mix(&e.type, sizeof e.type);
  }
  return h;
}

// What synchronize() would copy: the step count, the parameters and the registered state. Ranks
// with equal hashes hold the same bits (but for a 2^-64 chance), so nothing needs to travel.
uint64_t contentHash(int64_t steps, const std::vector<Param>& params,
                     const std::vector<ExtraState>& extra) {
  uint64_t h = hashBytes(0, &steps, sizeof steps);
  for (const Param& p : params) h = hashBytes(h, p.value, p.count * sizeof(float));
  for (const ExtraState& e : extra) h = hashBytes(h, e.data, e.count * sizeOf(e.type));
  return h;
}

size_t stateBytes(const std::vector<Param>& params, const std::vector<ExtraState>& extra) {
  size_t bytes = sizeof(int64_t) * 2;
  for (const Param& p : params) bytes += p.count * sizeof(float);
  for (const ExtraState& e : extra) bytes += e.count * sizeOf(e.type);
  return bytes;
}

// Waits for every Work, also after one failed (they write into our buffers), then throws the
// first failure.
void waitAll(std::vector<Work>& works) {
  std::exception_ptr first;
  for (Work& w : works) {
    try {
      w.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace

int Replica::Impl::synchronizeState() {
  const int n = comm->size();
  // Per rank: progress, whether it needs the state (first synchronisation), layout, content.
  constexpr int kFields = 4;
  int64_t mine[kFields] = {progress, synchronized ? 0 : 1, 0, 0};
  const uint64_t layout = layoutHash(params, extra);
  const uint64_t content = contentHash(steps, params, extra);
  std::memcpy(&mine[2], &layout, sizeof layout);
  std::memcpy(&mine[3], &content, sizeof content);
  std::vector<int64_t> all(kFields * static_cast<size_t>(n));
  withContext("dp synchronize: agreeing on the source of the state",
              [&] { comm->allGather(mine, all.data(), kFields, DataType::kI64).wait(); });
  auto at = [&](int r, int field) { return all[kFields * static_cast<size_t>(r) + field]; };
  int source = 0;
  bool wanted = false, identical = true;
  for (int r = 0; r < n; ++r) {
    if (at(r, 2) != at(0, 2)) {
      throw Error(ErrorCode::kMismatch,
                  "dp synchronize (rank " + std::to_string(comm->rank()) + "): rank " +
                      std::to_string(r) +
                      " registered different parameters or state (names, sizes, types, order) "
                      "than rank 0");
    }
    if (at(r, 0) > at(source, 0)) source = r;
    identical = identical && at(r, 3) == at(0, 3);
  }
  for (int r = 0; r < n; ++r) wanted = wanted || at(r, 1) != 0 || at(r, 0) != at(source, 0);
  if (!wanted) {
    synchronized = true;
    return -1;
  }
  const int me = comm->rank();
  const DebugLevel debug = comm->options().debug;
  const bool say = debug == DebugLevel::kAll || (debug == DebugLevel::kRank0 && me == 0);
  if (identical) {
    // Every rank already holds the source's bits: only the counter of progress moves.
    progress = at(source, 0);
    synchronized = true;
    if (say) {
      std::fprintf(stderr,
                   "chorus[%d]: dp synchronize: state identical on all %d ranks (content hash "
                   "%016llx, %zu bytes): nothing copied\n",
                   me, n, static_cast<unsigned long long>(content), stateBytes(params, extra));
    }
    return -1;
  }
  if (say) {
    int differing = 0;
    for (int r = 0; r < n; ++r) differing += at(r, 3) != at(source, 3) ? 1 : 0;
    std::fprintf(stderr,
                 "chorus[%d]: dp synchronize: state of %d of %d ranks differs from rank %d's "
                 "(content hashes): copying its %zu bytes\n",
                 me, differing, n, source, stateBytes(params, extra));
  }
  const std::string context = "dp synchronize: copying the state of rank " +
                              std::to_string(source) + " (rank " + std::to_string(me) + ")";
  int64_t counters[2] = {steps, progress};
  std::vector<Work> works;
  withContext(context, [&] {
    try {
      works.push_back(comm->broadcast(counters, 2, DataType::kI64, source));
      for (const Param& p : params)
        works.push_back(comm->broadcast(p.value, p.count, DataType::kF32, source));
      for (const ExtraState& e : extra)
        works.push_back(comm->broadcast(e.data, e.count, e.type, source));
    } catch (...) {
      try {
        waitAll(works);  // those already issued write into our buffers
      } catch (...) {
      }
      throw;
    }
    waitAll(works);
  });
  steps = counters[0];
  progress = counters[1];
  synchronized = true;
  return source;
}

}  // namespace chorus::dp
