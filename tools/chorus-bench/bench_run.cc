#include "bench.h"
#include "bench_memory.h"
#include "bench_values.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace chorus::bench {
namespace {

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

void checkStatus(chorus_status s, chorus_comm* c) {
  if (s != CHORUS_OK) throw Error(static_cast<ErrorCode>(s), chorus_last_error(c));
}

// Where one form of a call sends from and receives into.
struct Place {
  uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
};

// One rank's part of the sweep: the buffers, the timed calls and the checks of the results.
class Sweep {
 public:
  Sweep(chorus_comm* c, Communicator& comm, const Config& cfg)
      : c_(c),
        comm_(comm),
        cfg_(cfg),
        n_(chorus_comm_size(c)),
        r_(chorus_comm_rank(c)),
        es_(sizeOf(cfg.dtype)),
        // Sized once for the largest size and touched up front: no page faults while timing.
        in_(comm, cfg.maxBytes + es_, cfg.registered),
        out_(comm, cfg.maxBytes + es_, cfg.registered),
        // send_recv: even ranks send to the next rank, which receives (the last of an odd world
        // idles).
        partner_(r_ % 2 == 0 ? (r_ + 1 < n_ ? r_ + 1 : -1) : r_ - 1) {
    std::fill(in_.begin(), in_.end(), 0);
    std::fill(out_.begin(), out_.end(), 0);
  }

  Row row(const SweepPoint& p) {
    Row row;
    row.count = p.count;
    row.bytes = p.bytes;
    counts_ = unevenCounts(p.total, n_);
    sendCounts_.assign(static_cast<size_t>(n_), p.count);
    if (hasForm(cfg_.op, Form::kOutOfPlace)) row.outOfPlace = measure(p, Form::kOutOfPlace);
    // --in-place 0 skips the in-place form, unless it is the collective's only one.
    const bool onlyInPlace = !hasForm(cfg_.op, Form::kOutOfPlace);
    if ((cfg_.inPlace || onlyInPlace) && hasForm(cfg_.op, Form::kInPlace)) {
      row.inPlace = measure(p, Form::kInPlace);
    }
    return row;
  }

 private:
  size_t offsetOfMine() const {
    size_t at = 0;
    for (int q = 0; q < r_; ++q) at += counts_[static_cast<size_t>(q)];
    return at;
  }

  // In place, the send data lies where the library's in-place rule puts it in the receive
  // buffer (or the receive block in the send buffer).
  Place placeOf(Form form, size_t count) {
    uint8_t* in = in_.data();
    uint8_t* out = out_.data();
    if (cfg_.op == "broadcast") return {out, out};  // one buffer
    if (form == Form::kOutOfPlace) return {in, out};
    const auto me = static_cast<size_t>(r_);
    const std::string& op = cfg_.op;
    if (op == "reduce_scatter" || op == "scatter") return {in, in + me * count * es_};
    if (op == "all_gather" || op == "gather") return {out + me * count * es_, out};
    if (op == "reduce_scatter_v") return {in, in + offsetOfMine() * es_};
    if (op == "all_gather_v") return {out + offsetOfMine() * es_, out};
    return {out, out};  // allreduce, reduce, all_to_all
  }

  FormResult measure(const SweepPoint& p, Form form) {
    FormResult res;
    res.measured = true;
    const Place at = placeOf(form, p.count);
    for (int i = 0; i < cfg_.warmup; ++i) issue(p.count, at);
    std::vector<double> times(static_cast<size_t>(cfg_.iters));
    const int64_t cpu0 = processCpuNs();
    for (int i = 0; i < cfg_.iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      issue(p.count, at);
      times[static_cast<size_t>(i)] =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    }
    int64_t cpuNs = processCpuNs() - cpu0;
    res.algo = comm_.lastAlgorithm();  // read before the max-over-ranks call below replaces it
    // Slowest rank per iteration, then the median iteration.
    checkStatus(chorus_all_reduce(c_, times.data(), times.data(), times.size(), CHORUS_DTYPE_F64,
                                  CHORUS_OP_MAX),
                c_);
    std::sort(times.begin(), times.end());
    res.timeUs = times[times.size() / 2];
    const size_t low = times.size() / 10, high = times.size() - times.size() / 10;
    if (high > low) {
      double sum = 0;
      for (size_t i = low; i < high; ++i) sum += times[i];
      res.trimmedMeanUs = sum / static_cast<double>(high - low);
    }
    res.algbw = static_cast<double>(p.bytes) / (res.timeUs * 1e-6) / 1e9;
    res.busbw = res.algbw * busFactor(cfg_.op, n_);
    checkStatus(chorus_all_reduce(c_, &cpuNs, &cpuNs, 1, CHORUS_DTYPE_I64, CHORUS_OP_SUM), c_);
    res.cpuNsPerByte = static_cast<double>(cpuNs) / (static_cast<double>(cfg_.iters) * p.bytes);
    if (cfg_.check) {
      int64_t w = check(p, at);
      checkStatus(chorus_all_reduce(c_, &w, &w, 1, CHORUS_DTYPE_I64, CHORUS_OP_SUM), c_);
      res.wrong = static_cast<long>(w);
    }
    return res;
  }

  void issue(size_t count, Place at);
  void issueCpp(size_t count, Place at);
  long check(const SweepPoint& p, Place at);
  long checkReduced(size_t first, size_t len, const uint8_t* recv) const;

  chorus_comm* c_;
  Communicator& comm_;
  const Config& cfg_;
  const int n_, r_;
  const size_t es_;
  BenchMemory in_, out_;
  const int partner_;
  std::vector<size_t> counts_, sendCounts_;  // v-variants: per rank; all_to_all_v: per pair
};

void Sweep::issueCpp(size_t count, Place at) {
  const std::string& op = cfg_.op;
  const DataType t = cfg_.dtype;
  Work w;
  if (op == "allreduce") {
    w = comm_.allReduce(at.send, at.recv, count, t, cfg_.redop, CallOptions{cfg_.wire});
  }
  if (op == "reduce_scatter") w = comm_.reduceScatter(at.send, at.recv, count, t, cfg_.redop);
  if (op == "all_gather") w = comm_.allGather(at.send, at.recv, count, t);
  if (op == "broadcast") w = comm_.broadcast(at.recv, count, t, 0);
  if (op == "reduce") w = comm_.reduce(at.send, at.recv, count, t, cfg_.redop, 0);
  if (op == "gather") w = comm_.gather(at.send, at.recv, count, t, 0);
  if (op == "scatter") w = comm_.scatter(at.send, at.recv, count, t, 0);
  if (op == "all_to_all") w = comm_.allToAll(at.send, at.recv, count, t);
  if (op == "all_gather_v") w = comm_.allGatherV(at.send, at.recv, counts_.data(), t);
  if (op == "reduce_scatter_v") {
    w = comm_.reduceScatterV(at.send, at.recv, counts_.data(), t, cfg_.redop);
  }
  if (op == "all_to_all_v") {
    w = comm_.allToAllV(at.send, sendCounts_.data(), at.recv, sendCounts_.data(), t);
  }
  if (op == "send_recv") {
    if (partner_ < 0) return;
    w = r_ % 2 == 0 ? comm_.send(at.send, count, t, partner_)
                    : comm_.recv(at.recv, count, t, partner_);
  }
  w.wait();
}

// Timed calls go through the C API (what MPI-style callers use) unless cfg.api is "cpp".
void Sweep::issue(size_t count, Place at) {
  if (cfg_.api == "cpp") return issueCpp(count, at);
  const std::string& op = cfg_.op;
  const auto ct = static_cast<chorus_dtype>(cfg_.dtype);
  const auto co = static_cast<chorus_op>(cfg_.redop);
  chorus_comm* c = c_;
  chorus_status s = CHORUS_OK;
  if (op == "allreduce" && cfg_.wire != WireFormat::kNative) {
    const chorus_collective_options wire{sizeof(chorus_collective_options),
                                         static_cast<chorus_wire>(cfg_.wire)};
    s = chorus_all_reduce_with_options(c, at.send, at.recv, count, ct, co, &wire);
  } else if (op == "allreduce") {
    s = chorus_all_reduce(c, at.send, at.recv, count, ct, co);
  } else if (op == "reduce_scatter") {
    s = chorus_reduce_scatter(c, at.send, at.recv, count, ct, co);
  } else if (op == "all_gather") {
    s = chorus_all_gather(c, at.send, at.recv, count, ct);
  } else if (op == "broadcast") {
    s = chorus_broadcast(c, at.recv, count, ct, 0);
  } else if (op == "reduce") {
    s = chorus_reduce(c, at.send, at.recv, count, ct, co, 0);
  } else if (op == "gather") {
    s = chorus_gather(c, at.send, at.recv, count, ct, 0);
  } else if (op == "scatter") {
    s = chorus_scatter(c, at.send, at.recv, count, ct, 0);
  } else if (op == "all_to_all") {
    s = chorus_all_to_all(c, at.send, at.recv, count, ct);
  } else if (op == "all_gather_v") {
    s = chorus_all_gather_v(c, at.send, at.recv, counts_.data(), ct);
  } else if (op == "reduce_scatter_v") {
    s = chorus_reduce_scatter_v(c, at.send, at.recv, counts_.data(), ct, co);
  } else if (op == "all_to_all_v") {
    s = chorus_all_to_all_v(c, at.send, sendCounts_.data(), at.recv, sendCounts_.data(), ct);
  } else if (op == "send_recv" && partner_ >= 0) {
    s = r_ % 2 == 0 ? chorus_send(c, at.send, count, ct, partner_)
                    : chorus_recv(c, at.recv, count, ct, partner_);
  }
  checkStatus(s, c);
}

// Elements [first, first + len) of the reduction, read at recv.
long Sweep::checkReduced(size_t first, size_t len, const uint8_t* recv) const {
  // A wire format rounds at each of n hops: 16-bit relative to the value, int8 to its block's
  // largest partial sum (at most 3n here), half a step of 1/127 of it per hop.
  const double n = n_;
  const double wireSlack = cfg_.wire == WireFormat::kNative      ? 0.0
                           : cfg_.wire == WireFormat::kInt8Block ? 3.0 * n * n / 127
                                                                 : 5e-2;
  long wrong = 0;
  for (size_t i = 0; i < len; ++i) {
    double want = expectedReduced(first + i, n_, cfg_.redop);
    const double got = valueAt(recv + i * es_, cfg_.dtype);
    if (cfg_.redop == ReduceOp::kAvg) {
      want =
          isInteger(cfg_.dtype) ? static_cast<double>(static_cast<long long>(want) / n_) : want / n;
      // Floats: compare loosely, the division rounds in the element type.
      wrong += std::abs(got - want) > 2e-2 * std::abs(want) + wireSlack / n + 1e-3;
    } else if (cfg_.wire != WireFormat::kNative) {
      wrong += std::abs(got - want) > 2e-2 * std::abs(want) + wireSlack;
    } else {
      wrong += got != want;
    }
  }
  return wrong;
}

// Fills this rank's input, runs the call once more and counts the elements this rank got wrong.
long Sweep::check(const SweepPoint& p, Place at) {
  const std::string& op = cfg_.op;
  const DataType t = cfg_.dtype;
  const size_t count = p.count;
  const auto me = static_cast<size_t>(r_);
  auto got = [&](size_t i) { return valueAt(at.recv + i * es_, t); };
  long wrong = 0;
  if (op == "send_recv") {
    fillInput(at.send, count, t, r_);
    issue(count, at);
    for (size_t j = 0; partner_ >= 0 && r_ % 2 == 1 && j < count; ++j) {
      wrong += got(j) != filled(j, partner_);
    }
  } else if (op == "gather" || op == "all_gather_v" || op == "all_gather") {
    // Block q (count or counts[q] elements) comes from rank q, which filled it as its own.
    const bool v = op == "all_gather_v";
    fillInput(at.send, v ? counts_[me] : count, t, r_);
    issue(count, at);
    if (op != "gather" || r_ == 0) {
      size_t i = 0;
      for (int q = 0; q < n_; ++q) {
        const size_t len = v ? counts_[static_cast<size_t>(q)] : count;
        for (size_t j = 0; j < len; ++j, ++i) wrong += got(i) != filled(j, q);
      }
    }
  } else if (op == "scatter") {
    // The root's block q holds what rank q checks: q's own fill.
    if (r_ == 0) {
      for (int q = 0; q < n_; ++q) {
        fillInput(at.send + static_cast<size_t>(q) * count * es_, count, t, q);
      }
    }
    issue(count, at);
    for (size_t j = 0; j < count; ++j) wrong += got(j) != filled(j, r_);
  } else if (op == "all_to_all" || op == "all_to_all_v") {
    // Rank q's send buffer is its fill over the whole buffer; its block r comes here.
    fillInput(at.send, p.total, t, r_);
    issue(count, at);
    for (int q = 0; q < n_; ++q) {
      for (size_t j = 0; j < count; ++j) {
        wrong += got(static_cast<size_t>(q) * count + j) != filled(me * count + j, q);
      }
    }
  } else if (op == "broadcast") {
    if (r_ == 0) fillInput(at.send, count, t, 0);
    issue(count, at);
    for (size_t i = 0; i < count; ++i) wrong += got(i) != filled(i, 0);
  } else {  // allreduce, reduce_scatter, reduce, reduce_scatter_v
    fillInput(at.send, p.total, t, r_);
    issue(count, at);
    const bool v = op == "reduce_scatter_v";
    const size_t first = v ? offsetOfMine() : op == "reduce_scatter" ? count * me : 0;
    const size_t len = v ? counts_[me] : (op == "reduce" && r_ != 0 ? 0 : count);
    wrong += checkReduced(first, len, at.recv);
  }
  return wrong;
}

}  // namespace

bool hasForm(const std::string& op, Form form) {
  if (op == "broadcast") return form == Form::kInPlace;
  if (op == "send_recv" || op == "all_to_all_v") return form == Form::kOutOfPlace;
  return true;
}

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

std::vector<Row> runSweep(chorus_comm* c, Communicator& comm, const Config& cfg,
                          const std::function<void(const Row&)>& onRow) {
  Sweep sweep(c, comm, cfg);
  std::vector<Row> rows;
  for (const SweepPoint& p : sweepPoints(cfg, chorus_comm_size(c))) {
    rows.push_back(sweep.row(p));
    if (onRow) onRow(rows.back());
  }
  return rows;
}

}  // namespace chorus::bench
