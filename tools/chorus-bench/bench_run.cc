#include "bench.h"
#include "bench_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace chorus::bench {
namespace {

// Small integers: exact in every dtype and every summation order, for #wrong.
template <class Buf>
void fillInput(Buf& buf, size_t count, DataType t, int rank) {
  for (size_t i = 0; i < count; ++i) {
    int v = static_cast<int>((i + static_cast<size_t>(rank)) % 3) + 1;
    uint8_t* p = buf.data() + i * sizeOf(t);
    switch (t) {
      case DataType::kF32: {
        float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case DataType::kF64: {
        double d = v;
        std::memcpy(p, &d, 8);
        break;
      }
      case DataType::kF16: {
        _Float16 h = static_cast<_Float16>(v);
        std::memcpy(p, &h, 2);
        break;
      }
      case DataType::kBF16: {
        float f = static_cast<float>(v);
        uint32_t u;
        std::memcpy(&u, &f, 4);
        uint16_t b = static_cast<uint16_t>(u >> 16);  // exact for small integers
        std::memcpy(p, &b, 2);
        break;
      }
      case DataType::kI8:
      case DataType::kU8:
        *p = static_cast<uint8_t>(v);
        break;
      case DataType::kI32: {
        int32_t x = v;
        std::memcpy(p, &x, 4);
        break;
      }
      case DataType::kI64: {
        int64_t x = v;
        std::memcpy(p, &x, 8);
        break;
      }
    }
  }
}

double valueAt(const uint8_t* p, DataType t) {
  switch (t) {
    case DataType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DataType::kF64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DataType::kF16: {
      _Float16 h;
      std::memcpy(&h, p, 2);
      return static_cast<double>(h);
    }
    case DataType::kBF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      uint32_t u = static_cast<uint32_t>(b) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case DataType::kI8:
      return static_cast<int8_t>(*p);
    case DataType::kU8:
      return *p;
    case DataType::kI32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DataType::kI64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
  }
  return 0;
}

// Expected element i of a reduction of fillInput over n ranks.
double expectedReduced(size_t i, int n, ReduceOp op) {
  double acc = op == ReduceOp::kProd
                   ? 1
                   : (op == ReduceOp::kMin ? 1e300 : (op == ReduceOp::kMax ? -1e300 : 0));
  for (int r = 0; r < n; ++r) {
    double v = static_cast<double>((i + static_cast<size_t>(r)) % 3) + 1;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
    }
  }
  return acc;
}

// CPU time of the whole process (every thread, user + system) so far, in nanoseconds.
int64_t processCpuNs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto ns = [](const timeval& t) { return int64_t{t.tv_sec} * 1000000000 + t.tv_usec * 1000; };
  return ns(u.ru_utime) + ns(u.ru_stime);
}

struct SweepPoint {
  size_t total = 0;  // elements in the whole (largest) buffer
  size_t count = 0;  // elements per rank's contribution
  size_t bytes = 0;
};

std::vector<SweepPoint> sweepPoints(const Config& cfg, int n) {
  const size_t es = sizeOf(cfg.dtype);
  // Every collective but these splits the buffer into one block per rank.
  const bool perRankBlocks =
      cfg.op != "allreduce" && cfg.op != "broadcast" && cfg.op != "reduce" && cfg.op != "send_recv";
  std::vector<SweepPoint> points;
  for (double b = static_cast<double>(cfg.minBytes);
       b <= static_cast<double>(cfg.maxBytes) * 1.0000001; b *= cfg.stepFactor) {
    SweepPoint p;
    p.total = static_cast<size_t>(b) / es;
    if (perRankBlocks) p.total -= p.total % static_cast<size_t>(n);
    if (p.total == 0) p.total = perRankBlocks ? static_cast<size_t>(n) : 1;
    p.count = perRankBlocks ? p.total / static_cast<size_t>(n) : p.total;
    p.bytes = p.total * es;
    if (p.bytes > cfg.maxBytes + es) break;
    points.push_back(p);
  }
  return points;
}

// The v-variants' per-rank counts: `total` split unevenly (ranks alternately half a block more
// and less; the last rank takes what is left), so that the bench sees blocks of different sizes.
std::vector<size_t> unevenCounts(size_t total, int n) {
  const auto nn = static_cast<size_t>(n);
  const size_t block = total / nn;
  std::vector<size_t> counts(nn);
  size_t used = 0;
  for (size_t r = 0; r + 1 < nn; ++r) {
    counts[r] = r % 2 == 0 ? block + block / 2 : block - block / 2;
    used += counts[r];
  }
  counts[nn - 1] = total - used;
  return counts;
}

// What rank `from`'s element i of the v-variants' and all-to-all's inputs is (fillInput's value).
double filled(size_t i, int from) {
  return static_cast<double>((i + static_cast<size_t>(from)) % 3) + 1;
}

}  // namespace

std::vector<size_t> sweepBytes(const Config& cfg, int worldSize) {
  std::vector<size_t> bytes;
  for (const SweepPoint& p : sweepPoints(cfg, worldSize)) bytes.push_back(p.bytes);
  return bytes;
}

double busFactor(const std::string& op, int n) {
  if (op == "allreduce") return 2.0 * (n - 1) / n;
  if (op == "reduce_scatter" || op == "all_gather") return static_cast<double>(n - 1) / n;
  // As nccl-tests: the data each rank (or the root) must move, over the time.
  if (op == "gather" || op == "scatter" || op == "all_to_all" || op == "all_to_all_v" ||
      op == "all_gather_v" || op == "reduce_scatter_v") {
    return static_cast<double>(n - 1) / n;
  }
  return 1.0;
}

void checkStatus(chorus_status s, chorus_comm* c) {
  if (s != CHORUS_OK) {
    throw Error(static_cast<ErrorCode>(s), chorus_last_error(c));
  }
}

std::vector<Row> runSweep(chorus_comm* c, Communicator& comm, const Config& cfg) {
  const int n = chorus_comm_size(c), r = chorus_comm_rank(c);
  const size_t es = sizeOf(cfg.dtype);
  // Buffers sized once for the largest size and touched up front: no page faults while timing.
  BenchMemory in(comm, cfg.maxBytes + es, cfg.registered);
  BenchMemory out(comm, cfg.maxBytes + es, cfg.registered);
  std::fill(in.begin(), in.end(), 0);
  std::fill(out.begin(), out.end(), 0);

  const auto ct = static_cast<chorus_dtype>(cfg.dtype);
  const auto co = static_cast<chorus_op>(cfg.redop);
  std::vector<size_t> counts, sendCounts;  // v-variants: per rank; all_to_all_v: per pair
  // send_recv: even ranks send to the next rank, which receives (the last of an odd world idles).
  const int partner = r % 2 == 0 ? (r + 1 < n ? r + 1 : -1) : r - 1;
  // reduce, gather, scatter, all-to-all, the v-variants (root 0) and send_recv.
  auto issueMore = [&](size_t count) {
    if (cfg.op == "send_recv") {
      if (partner < 0) return;
      const bool sends = r % 2 == 0;
      if (cfg.api == "cpp") {
        (sends ? comm.send(in.data(), count, cfg.dtype, partner)
               : comm.recv(out.data(), count, cfg.dtype, partner))
            .wait();
        return;
      }
      return checkStatus(sends ? chorus_send(c, in.data(), count, ct, partner)
                               : chorus_recv(c, out.data(), count, ct, partner),
                         c);
    }
    if (cfg.api == "cpp") {
      Work w;
      if (cfg.op == "reduce")
        w = comm.reduce(in.data(), out.data(), count, cfg.dtype, cfg.redop, 0);
      if (cfg.op == "gather") w = comm.gather(in.data(), out.data(), count, cfg.dtype, 0);
      if (cfg.op == "scatter") w = comm.scatter(in.data(), out.data(), count, cfg.dtype, 0);
      if (cfg.op == "all_to_all") w = comm.allToAll(in.data(), out.data(), count, cfg.dtype);
      if (cfg.op == "all_gather_v") {
        w = comm.allGatherV(in.data(), out.data(), counts.data(), cfg.dtype);
      }
      if (cfg.op == "reduce_scatter_v") {
        w = comm.reduceScatterV(in.data(), out.data(), counts.data(), cfg.dtype, cfg.redop);
      }
      if (cfg.op == "all_to_all_v") {
        w = comm.allToAllV(in.data(), sendCounts.data(), out.data(), sendCounts.data(), cfg.dtype);
      }
      w.wait();
      return;
    }
    if (cfg.op == "reduce")
      return checkStatus(chorus_reduce(c, in.data(), out.data(), count, ct, co, 0), c);
    if (cfg.op == "gather")
      return checkStatus(chorus_gather(c, in.data(), out.data(), count, ct, 0), c);
    if (cfg.op == "scatter")
      return checkStatus(chorus_scatter(c, in.data(), out.data(), count, ct, 0), c);
    if (cfg.op == "all_to_all")
      return checkStatus(chorus_all_to_all(c, in.data(), out.data(), count, ct), c);
    if (cfg.op == "all_gather_v")
      return checkStatus(chorus_all_gather_v(c, in.data(), out.data(), counts.data(), ct), c);
    if (cfg.op == "reduce_scatter_v") {
      return checkStatus(chorus_reduce_scatter_v(c, in.data(), out.data(), counts.data(), ct, co),
                         c);
    }
    checkStatus(
        chorus_all_to_all_v(c, in.data(), sendCounts.data(), out.data(), sendCounts.data(), ct), c);
  };
  const bool more = cfg.op != "allreduce" && cfg.op != "reduce_scatter" && cfg.op != "all_gather" &&
                    cfg.op != "broadcast";
  auto issue = [&](size_t count) {
    if (more) return issueMore(count);
    if (cfg.api == "cpp") {
      Work w;
      if (cfg.op == "allreduce")
        w = comm.allReduce(in.data(), out.data(), count, cfg.dtype, cfg.redop,
                           CallOptions{cfg.wire});
      if (cfg.op == "reduce_scatter") {
        w = comm.reduceScatter(in.data(), out.data(), count, cfg.dtype, cfg.redop);
      }
      if (cfg.op == "all_gather") w = comm.allGather(in.data(), out.data(), count, cfg.dtype);
      if (cfg.op == "broadcast") w = comm.broadcast(out.data(), count, cfg.dtype, 0);
      w.wait();
      return;
    }
    if (cfg.op == "allreduce" && cfg.wire != WireFormat::kNative) {
      const chorus_collective_options wire{sizeof(chorus_collective_options),
                                           static_cast<chorus_wire>(cfg.wire)};
      return checkStatus(
          chorus_all_reduce_with_options(c, in.data(), out.data(), count, ct, co, &wire), c);
    }
    if (cfg.op == "allreduce")
      return checkStatus(chorus_all_reduce(c, in.data(), out.data(), count, ct, co), c);
    if (cfg.op == "reduce_scatter") {
      return checkStatus(chorus_reduce_scatter(c, in.data(), out.data(), count, ct, co), c);
    }
    if (cfg.op == "all_gather")
      return checkStatus(chorus_all_gather(c, in.data(), out.data(), count, ct), c);
    return checkStatus(chorus_broadcast(c, out.data(), count, ct, 0), c);
  };

  std::vector<Row> rows;
  for (const SweepPoint& p : sweepPoints(cfg, n)) {
    Row row;
    const size_t total = p.total;  // elements in the whole (largest) buffer
    row.count = p.count;
    row.bytes = p.bytes;
    counts = unevenCounts(total, n);
    sendCounts.assign(static_cast<size_t>(n), row.count);

    for (int i = 0; i < cfg.warmup; ++i) issue(row.count);
    std::vector<double> times(static_cast<size_t>(cfg.iters));
    const int64_t cpu0 = processCpuNs();
    for (int i = 0; i < cfg.iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      issue(row.count);
      times[static_cast<size_t>(i)] =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    }
    int64_t cpuNs = processCpuNs() - cpu0;
    row.algo = comm.lastAlgorithm();  // read before the max-over-ranks call below replaces it
    // Slowest rank per iteration, then the median iteration.
    checkStatus(chorus_all_reduce(c, times.data(), times.data(), times.size(), CHORUS_DTYPE_F64,
                                  CHORUS_OP_MAX),
                c);
    std::sort(times.begin(), times.end());
    row.timeUs = times[times.size() / 2];
    const size_t low = times.size() / 10, high = times.size() - times.size() / 10;
    if (high > low) {
      double sum = 0;
      for (size_t i = low; i < high; ++i) sum += times[i];
      row.trimmedMeanUs = sum / static_cast<double>(high - low);
    }
    row.algbw = static_cast<double>(row.bytes) / (row.timeUs * 1e-6) / 1e9;
    row.busbw = row.algbw * busFactor(cfg.op, n);
    checkStatus(chorus_all_reduce(c, &cpuNs, &cpuNs, 1, CHORUS_DTYPE_I64, CHORUS_OP_SUM), c);
    row.cpuNsPerByte = static_cast<double>(cpuNs) / (static_cast<double>(cfg.iters) * row.bytes);

    if (cfg.check) {
      long wrong = 0;
      auto at = [&](size_t i) { return valueAt(out.data() + i * es, cfg.dtype); };
      const auto me = static_cast<size_t>(r);
      if (cfg.op == "send_recv") {
        fillInput(in, row.count, cfg.dtype, r);
        issue(row.count);
        for (size_t j = 0; partner >= 0 && r % 2 == 1 && j < row.count; ++j) {
          wrong += at(j) != filled(j, partner);
        }
      } else if (cfg.op == "gather" || cfg.op == "all_gather_v") {
        // Block q (count or counts[q] elements) comes from rank q, which filled it as its own.
        const bool v = cfg.op == "all_gather_v";
        fillInput(in, v ? counts[me] : row.count, cfg.dtype, r);
        issue(row.count);
        if (v || r == 0) {
          size_t i = 0;
          for (int q = 0; q < n; ++q) {
            const size_t len = v ? counts[static_cast<size_t>(q)] : row.count;
            for (size_t j = 0; j < len; ++j, ++i) wrong += at(i) != filled(j, q);
          }
        }
      } else if (cfg.op == "scatter") {
        // The root's block q holds what rank q checks: q's own fill.
        if (r == 0) {
          std::vector<uint8_t> block(row.count * es);
          for (int q = 0; q < n; ++q) {
            fillInput(block, row.count, cfg.dtype, q);
            std::memcpy(in.data() + static_cast<size_t>(q) * block.size(), block.data(),
                        block.size());
          }
        }
        issue(row.count);
        for (size_t j = 0; j < row.count; ++j) wrong += at(j) != filled(j, r);
      } else if (cfg.op == "all_to_all" || cfg.op == "all_to_all_v") {
        // Rank q's send buffer is its fill over the whole buffer; its block r comes here.
        fillInput(in, total, cfg.dtype, r);
        issue(row.count);
        for (int q = 0; q < n; ++q) {
          for (size_t j = 0; j < row.count; ++j) {
            wrong += at(static_cast<size_t>(q) * row.count + j) != filled(me * row.count + j, q);
          }
        }
      } else if (cfg.op == "reduce" || cfg.op == "reduce_scatter_v") {
        const bool v = cfg.op == "reduce_scatter_v";
        fillInput(in, total, cfg.dtype, r);
        issue(row.count);
        size_t first = 0;
        for (size_t q = 0; v && q < me; ++q) first += counts[q];
        const size_t len = v ? counts[me] : (r == 0 ? row.count : 0);
        for (size_t i = 0; i < len; ++i) {
          double want = expectedReduced(first + i, n, cfg.redop);
          if (cfg.redop == ReduceOp::kAvg) {
            const bool integer = cfg.dtype == DataType::kI8 || cfg.dtype == DataType::kU8 ||
                                 cfg.dtype == DataType::kI32 || cfg.dtype == DataType::kI64;
            want = integer ? static_cast<double>(static_cast<long long>(want) / n) : want / n;
            wrong += std::abs(at(i) - want) > 1e-2 * std::abs(want) + 1e-3;  // rounds in the type
            continue;
          }
          wrong += at(i) != want;
        }
      } else if (cfg.op == "broadcast") {
        if (r == 0) fillInput(out, row.count, cfg.dtype, 0);
        issue(row.count);
        for (size_t i = 0; i < row.count; ++i) {
          wrong += valueAt(out.data() + i * es, cfg.dtype) != static_cast<double>(i % 3 + 1);
        }
      } else if (cfg.op == "all_gather") {
        fillInput(in, row.count, cfg.dtype, r);
        issue(row.count);
        for (size_t i = 0; i < total; ++i) {
          size_t q = i / row.count, j = i % row.count;
          wrong += valueAt(out.data() + i * es, cfg.dtype) != static_cast<double>((j + q) % 3 + 1);
        }
      } else {
        fillInput(in, total, cfg.dtype, r);
        issue(row.count);
        size_t first = cfg.op == "reduce_scatter" ? row.count * static_cast<size_t>(r) : 0;
        // A wire format rounds at each of n hops: 16-bit relative to the value, int8 to its
        // block's largest partial sum (at most 3n here), half a step of 1/127 of it per hop.
        const double wireSlack = cfg.wire == WireFormat::kNative      ? 0.0
                                 : cfg.wire == WireFormat::kInt8Block ? 3.0 * n * n / 127
                                                                      : 5e-2;
        for (size_t i = 0; i < row.count; ++i) {
          double want = expectedReduced(first + i, n, cfg.redop);
          if (cfg.redop == ReduceOp::kAvg) {
            want = sizeOf(cfg.dtype) && (cfg.dtype == DataType::kI8 || cfg.dtype == DataType::kU8 ||
                                         cfg.dtype == DataType::kI32 || cfg.dtype == DataType::kI64)
                       ? static_cast<double>(static_cast<long long>(want) / n)
                       : want / n;
            // Floats: compare loosely, the division rounds in the element type.
            double got = valueAt(out.data() + i * es, cfg.dtype);
            wrong += std::abs(got - want) > 2e-2 * std::abs(want) + wireSlack / n + 1e-3;
            continue;
          }
          if (cfg.wire != WireFormat::kNative) {
            wrong += std::abs(valueAt(out.data() + i * es, cfg.dtype) - want) >
                     2e-2 * std::abs(want) + wireSlack;
            continue;
          }
          wrong += valueAt(out.data() + i * es, cfg.dtype) != want;
        }
      }
      int64_t w = wrong;
      checkStatus(chorus_all_reduce(c, &w, &w, 1, CHORUS_DTYPE_I64, CHORUS_OP_SUM), c);
      row.wrong = static_cast<long>(w);
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace chorus::bench
