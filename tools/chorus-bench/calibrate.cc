// chorus-bench --calibrate FILE: measures the cost model's constants on this job's machines and
// writes them for CHORUS_TUNING_FILE (docs/algorithms.md, "Choosing an algorithm").
//
// alpha and beta of a link kind come from a two-rank broadcast between rank 0 and the first peer
// it reaches that way (shared memory, TCP): the broadcast sends the data and returns a small
// acknowledgement, so its time is 2 alpha + n beta. alpha is half the median time of an 8-byte
// broadcast, beta the slope between the two largest sizes (minimum of the repetitions, the
// least disturbed). gamma is rank 0's time to reduce two 4 MiB buffers with the library's own
// kernel, per dtype. A link kind no peer uses keeps the built-in value, and the file says so.
// With 3 or more ranks, the ring all-reduce runs one way and both ways (two rings over the
// buffer's halves) at 2, 8 and 64 MiB; both ways is turned on from the smallest of these sizes
// from which it was over 5% faster at every one.
#include "bench.h"
#include "reduce/reduce.h"

#include <chorus/chorus.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

namespace chorus::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Fit {
  double alpha = 0;
  double beta = 0;
};

void check(chorus_status st, chorus_comm* c) {
  if (st != CHORUS_OK) throw std::runtime_error(chorus_last_error(c));
}

// On the two-rank communicator, through the blocking C calls chorus-bench times: broadcasts of
// growing sizes, root 0.
Fit measurePair(chorus_comm* pair) {
  const size_t small = 8, mid = 1u << 20, large = 4u << 20;
  std::vector<uint8_t> buf(large, 1);
  auto timeOne = [&](size_t bytes) {
    check(chorus_barrier(pair), pair);
    auto t0 = Clock::now();
    check(chorus_broadcast(pair, buf.data(), bytes, CHORUS_DTYPE_U8, 0), pair);
    return seconds(t0, Clock::now());
  };
  // Warm up connections and scratch. On the emulated cluster the first few hundred small
  // round trips of a fresh connection took 130 us against 25 us afterwards.
  for (int i = 0; i < 1000; ++i) timeOne(small);
  timeOne(large);
  std::vector<double> s, m, l;
  for (int i = 0; i < 200; ++i) s.push_back(timeOne(small));
  for (int i = 0; i < 8; ++i) m.push_back(timeOne(mid));
  for (int i = 0; i < 8; ++i) l.push_back(timeOne(large));
  Fit f;
  f.alpha = median(s) / 2;
  double tm = *std::min_element(m.begin(), m.end());
  double tl = *std::min_element(l.begin(), l.end());
  f.beta = std::max(0.0, (tl - tm) / static_cast<double>(large - mid));
  return f;
}

// Sizes at which the ring runs one way and both ways. Both ways lost at 4 MiB and won at 64 MiB on
// 4 emulated hosts, and won from 2 MiB on 8: the crossing depends on the job, so it is measured.
constexpr size_t kDirectionSizes[] = {2u << 20, 8u << 20, 64u << 20};
constexpr int kDirectionSamples = 3;

// Median times (seconds) of the ring all-reduce one way and both ways at each of
// kDirectionSizes, on communicators split off with those settings, alternating so that both see
// the same conditions.
std::vector<std::pair<double, double>> measureRingDirections(Communicator& comm) {
  Options one = comm.options();
  one.algorithm = parseAlgorithmSetting("ring");
  one.tuning.ringBidirectionalBytes = 0;
  Options two = one;
  two.tuning.ringBidirectionalBytes = 1;
  auto c1 = comm.split(0, comm.rank(), one);
  auto c2 = comm.split(0, comm.rank(), two);
  std::vector<float> buf(kDirectionSizes[std::size(kDirectionSizes) - 1] / sizeof(float), 1.0f);
  std::vector<std::pair<double, double>> result;
  for (size_t bytes : kDirectionSizes) {
    std::span<float> data(buf.data(), bytes / sizeof(float));
    auto timeOn = [&](Communicator& x) {
      x.barrier().wait();
      auto t0 = Clock::now();
      x.allReduce(data).wait();
      return seconds(t0, Clock::now());
    };
    timeOn(*c1);
    timeOn(*c2);
    std::vector<double> t1, t2;
    for (int i = 0; i < kDirectionSamples; ++i) {
      t1.push_back(timeOn(*c1));
      t2.push_back(timeOn(*c2));
    }
    result.emplace_back(median(t1), median(t2));
  }
  return result;
}

double measureGamma(DataType dtype) {
  const size_t bytes = 4u << 20;
  const size_t count = bytes / sizeOf(dtype);
  std::vector<uint8_t> a(bytes, 0), b(bytes, 0), dst(bytes, 0);  // zeros: valid in every dtype
  reduce::ReduceFn fn = reduce::reduceFn(dtype, ReduceOp::kSum);
  fn(dst.data(), a.data(), b.data(), count);
  std::vector<double> t;
  for (int i = 0; i < 9; ++i) {
    auto t0 = Clock::now();
    fn(dst.data(), a.data(), b.data(), count);
    t.push_back(seconds(t0, Clock::now()));
  }
  return median(t) / static_cast<double>(bytes);
}

}  // namespace

void calibrate(chorus_comm* c, const std::string& path) {
  Communicator& comm = communicatorOf(c);
  // Rank 0 picks the peers (its view of the transports) and tells everyone.
  int peers[2] = {-1, -1};  // shared memory, TCP
  if (comm.rank() == 0) {
    for (int p = 1; p < comm.size(); ++p) {
      int kind = comm.transportTo(p) == "shm" ? 0 : 1;
      if (peers[kind] < 0) peers[kind] = p;
    }
  }
  comm.broadcast(peers, 2, DataType::kI32, 0).wait();

  Tuning t;  // built-in values where nothing is measured
  std::string notes;
  const char* names[2] = {"shm", "net"};
  LinkCost* links[2] = {&t.shm, &t.net};
  for (int kind = 0; kind < 2; ++kind) {
    const int peer = peers[kind];
    if (peer < 0) {
      notes += std::string(names[kind]) + ": no such peer in this job, built-in values kept\n";
      continue;
    }
    const bool in = comm.rank() == 0 || comm.rank() == peer;
    chorus_comm* pair = nullptr;
    check(chorus_comm_split(c, in ? 0 : CHORUS_NO_COLOR, comm.rank(), &pair), c);
    Fit f;
    if (pair) {
      f = measurePair(pair);
      check(chorus_comm_destroy(pair), nullptr);
    }
    comm.broadcast(&f, sizeof f, DataType::kU8, 0).wait();
    *links[kind] = LinkCost{f.alpha, f.beta};
    notes += std::string(names[kind]) + ": measured between rank 0 and rank " +
             std::to_string(peer) + " (" + comm.hostOf(peer) + ")\n";
  }
  // With more than two ranks all of one link kind, a round of messages among all of them (the
  // dissemination barrier: ceil(log2 N) rounds) can cost more per round than one pair's message
  // when the ranks compete for cores or a switch: take the larger, as the collectives see it.
  const int n = comm.size();
  const int kind = peers[0] < 0 ? 1 : (peers[1] < 0 ? 0 : -1);
  if (n >= 3 && kind >= 0) {
    int rounds = 0;
    while ((1 << rounds) < n) ++rounds;
    std::vector<double> times;
    for (int i = 0; i < 220; ++i) {
      auto t0 = Clock::now();
      check(chorus_barrier(c), c);
      if (i >= 20) times.push_back(seconds(t0, Clock::now()));
    }
    double perRound = median(times) / rounds;
    comm.broadcast(&perRound, sizeof perRound, DataType::kU8, 0).wait();
    if (perRound > links[kind]->alpha) {
      notes += std::string(names[kind]) + ": alpha from a barrier of all " + std::to_string(n) +
               " ranks (" + std::to_string(rounds) + " rounds), above the pair's " +
               std::to_string(links[kind]->alpha * 1e6) + " us\n";
      links[kind]->alpha = perRound;
    }
  }
  if (n >= 3) {
    // Rank 0's view decides for everyone. Both ways from the smallest size from which it was
    // over 5% faster at every measured size.
    std::vector<std::pair<double, double>> times = measureRingDirections(comm);
    comm.broadcast(times.data(), times.size() * sizeof(times[0]), DataType::kU8, 0).wait();
    size_t from = 0;
    for (size_t i = times.size(); i-- > 0;) {
      if (times[i].second >= 0.95 * times[i].first) break;
      from = kDirectionSizes[i];
    }
    t.ringBidirectionalBytes = static_cast<double>(from);
    notes += "ring one way / both ways:";
    for (size_t i = 0; i < times.size(); ++i) {
      char cell[96];
      std::snprintf(cell, sizeof cell, "%s %zu MiB %.1f / %.1f ms", i ? "," : "",
                    kDirectionSizes[i] >> 20, times[i].first * 1e3, times[i].second * 1e3);
      notes += cell;
    }
    notes += from ? "; both ways from " + std::to_string(from >> 20) + " MiB\n" : "; one way\n";
  }
  if (comm.rank() == 0) {
    for (int d = 0; d < kNumDataTypes; ++d) {
      t.gamma[static_cast<size_t>(d)] = measureGamma(static_cast<DataType>(d));
    }
    char when[64];
    std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
    t.writeFile(path, "written by chorus-bench --calibrate, " + std::to_string(comm.size()) +
                          " ranks, " + when + "\n" + notes +
                          "gamma: rank 0 reducing 4 MiB buffers (sum)");
    std::printf("# calibration written to %s\n", path.c_str());
    std::printf("#   shm: alpha %.2f us, beta %.4f ns/B (%.2f GB/s)\n", t.shm.alpha * 1e6,
                t.shm.beta * 1e9, t.shm.beta > 0 ? 1e-9 / t.shm.beta : 0.0);
    std::printf("#   net: alpha %.2f us, beta %.4f ns/B (%.2f GB/s)\n", t.net.alpha * 1e6,
                t.net.beta * 1e9, t.net.beta > 0 ? 1e-9 / t.net.beta : 0.0);
    std::printf("#   ring both ways from %.0f bytes (0: off)\n", t.ringBidirectionalBytes);
    std::printf("#   gamma f32 %.4f ns/B, f16 %.4f ns/B\n",
                t.gamma[static_cast<size_t>(DataType::kF32)] * 1e9,
                t.gamma[static_cast<size_t>(DataType::kF16)] * 1e9);
    std::fflush(stdout);
  }
  comm.barrier().wait();
}

}  // namespace chorus::bench
