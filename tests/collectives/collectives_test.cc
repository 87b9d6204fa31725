// Every collective, dtype and op over thread-ranks, checked against an independent reference
// and for bit-identical results across ranks.
#include "collectives/reference.h"
#include "harness/thread_ranks.h"

#include <gtest/gtest.h>

#include <functional>
#include <mutex>
#include <ostream>
#include <span>
#include <stdexcept>

namespace chorus::testing {
namespace {

std::string label(const char* what, DataType t, ReduceOp op, size_t count, bool inPlace) {
  return std::string(what) + " " + std::string(toString(t)) + " " + std::string(toString(op)) +
         " count=" + std::to_string(count) + (inPlace ? " in-place" : "");
}

void check(const std::string& what, int rank, const Buffer& got, const Buffer& want, size_t es) {
  if (got.size() != want.size()) throw std::runtime_error(what + ": size differs");
  long i = firstDifference(got.data(), want.data(), got.size() / es, es);
  if (i >= 0) {
    throw std::runtime_error(what + ": rank " + std::to_string(rank) + " element " +
                             std::to_string(i) + " differs from the reference");
  }
}

struct Param {
  int size;
  const char* algo;
  size_t segmentBytes;
  const char* transport = "auto";
  // Host of each rank as a letter ("AABB": ranks 0, 1 on one host, 2, 3 on another); empty: all
  // ranks on this host.
  const char* layout = "";
};

// What --gtest_list_tests shows after "GetParam() =".
void PrintTo(const Param& p, std::ostream* os) {
  *os << "{size " << p.size << ", algorithm " << p.algo << ", segment " << p.segmentBytes
      << " B, transport " << p.transport;
  if (*p.layout) *os << ", hosts " << p.layout;
  *os << "}";
}

class Collectives : public ::testing::TestWithParam<Param> {
 protected:
  Options options() const {
    Options o = testOptions();
    o.algorithm = parseAlgorithmSetting(GetParam().algo);
    o.segmentBytes = GetParam().segmentBytes;
    o.transport = parseTransportKind(GetParam().transport);
    return o;
  }
  int size() const { return GetParam().size; }
  void expectRanks(int n, const std::function<void(Communicator&)>& body, Options o) const {
    std::string layout = GetParam().layout;
    if (layout.empty()) return testing::expectRanks(n, body, o);
    std::vector<std::string> hosts;
    for (char h : layout) hosts.push_back(std::string("host-") + h);
    testing::expectRanksOn(hosts, body, o);
  }
};

void allReduceCase(Communicator& c, DataType t, ReduceOp op, size_t count, bool inPlace) {
  const int n = c.size();
  std::vector<Buffer> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(makeInput(t, op, r, count));
  Buffer want = reduceReference(t, op, inputs, count);
  Buffer in = inputs[static_cast<size_t>(c.rank())];
  Buffer out(in.size(), 0xAB);
  if (inPlace) {
    c.allReduce(in.data(), in.data(), count, t, op).wait();
    out = in;
  } else {
    Buffer before = in;
    c.allReduce(in.data(), out.data(), count, t, op).wait();
    if (in != before) throw std::runtime_error("allreduce modified its input");
  }
  check(label("allreduce", t, op, count, inPlace), c.rank(), out, want, sizeOf(t));
}

TEST_P(Collectives, AllReduceEveryTypeAndOp) {
  expectRanks(
      size(),
      [&](Communicator& c) {
        for (DataType t : kTypes) {
          for (ReduceOp op : kOps) {
            for (size_t count : smallCounts(size())) {
              allReduceCase(c, t, op, count, false);
              allReduceCase(c, t, op, count, true);
            }
          }
        }
      },
      options());
}

// The ring both ways (Tuning::ringBidirectionalBytes) over TCP and over shared memory: every type
// and op, awkward counts and a large prime count in small segments, every rank's result checked.
TEST(CollectivesBidirectionalRing, AllReduceEveryTypeAndOp) {
  const std::pair<int, const char*> cases[] = {
      {3, "tcp"}, {5, "tcp"}, {8, "tcp"}, {3, "shm"}, {5, "shm"}};
  for (auto [n, transport] : cases) {
    SCOPED_TRACE(transport);
    Options o = testOptions();
    o.algorithm = parseAlgorithmSetting("ring");
    o.transport = parseTransportKind(transport);
    o.segmentBytes = 4096;
    o.tuning.ringBidirectionalBytes = 1;
    testing::expectRanks(
        n,
        [&](Communicator& c) {
          for (DataType t : kTypes) {
            for (ReduceOp op : kOps) {
              for (size_t count : smallCounts(n)) allReduceCase(c, t, op, count, count % 2 == 0);
            }
          }
          allReduceCase(c, DataType::kF32, ReduceOp::kSum, 100003, false);
          allReduceCase(c, DataType::kBF16, ReduceOp::kAvg, 100003, true);
          if (c.lastAlgorithm() != "ring") throw std::runtime_error("ran " + c.lastAlgorithm());
        },
        o);
  }
}

TEST_P(Collectives, AllReduceLargePrimeCount) {
  expectRanks(
      size(),
      [&](Communicator& c) {
        for (DataType t : kTypes) allReduceCase(c, t, ReduceOp::kSum, 1000003, false);
        for (ReduceOp op : kOps) allReduceCase(c, DataType::kF32, op, 1000003, true);
      },
      options());
}

// Throws unless the last call ran `algo` (a group of one runs none).
void expectAlgorithm(Communicator& c, const std::string& algo) {
  if (algo.empty() || c.size() == 1) return;
  if (c.lastAlgorithm() != algo) {
    throw std::runtime_error("ran " + c.lastAlgorithm() + " instead of " + algo);
  }
}

// Every type and op, counts per block from smallCounts, out of place and in place.
void reduceScatterCases(Communicator& c, const std::string& algo = "") {
  const int n = c.size(), r = c.rank();
  for (DataType t : kTypes) {
    const size_t es = sizeOf(t);
    for (ReduceOp op : kOps) {
      for (size_t rc : smallCounts(n)) {
        std::vector<Buffer> inputs;
        for (int q = 0; q < n; ++q) inputs.push_back(makeInput(t, op, q, rc * n));
        Buffer all = reduceReference(t, op, inputs, rc * n);
        Buffer want(all.begin() + static_cast<long>(rc * es * r),
                    all.begin() + static_cast<long>(rc * es * (r + 1)));
        Buffer in = inputs[static_cast<size_t>(r)];
        Buffer out(rc * es, 0xCD);
        c.reduceScatter(in.data(), out.data(), rc, t, op).wait();
        if (rc > 0) expectAlgorithm(c, algo);
        check(label("reduce_scatter", t, op, rc, false), r, out, want, es);
        // In place: the result lands in this rank's block of the input.
        c.reduceScatter(in.data(), in.data() + rc * es * r, rc, t, op).wait();
        Buffer mine(in.begin() + static_cast<long>(rc * es * r),
                    in.begin() + static_cast<long>(rc * es * (r + 1)));
        check(label("reduce_scatter", t, op, rc, true), r, mine, want, es);
      }
    }
  }
}

// Every type, counts from smallCounts and a large one, out of place and in place.
void allGatherCases(Communicator& c, const std::string& algo = "", size_t large = 100003) {
  const int n = c.size(), r = c.rank();
  for (DataType t : kTypes) {
    const size_t es = sizeOf(t);
    std::vector<size_t> counts = smallCounts(n);
    counts.push_back(large);
    for (size_t sc : counts) {
      Buffer want;
      for (int q = 0; q < n; ++q) {
        Buffer b = makeInput(t, ReduceOp::kSum, q, sc, 7);
        want.insert(want.end(), b.begin(), b.end());
      }
      Buffer in = makeInput(t, ReduceOp::kSum, r, sc, 7);
      Buffer out(sc * es * n, 0xEE);
      c.allGather(in.data(), out.data(), sc, t).wait();
      if (sc > 0) expectAlgorithm(c, algo);
      check(label("all_gather", t, ReduceOp::kSum, sc, false), r, out, want, es);
      Buffer inPlace(sc * es * n, 0x11);
      std::copy(in.begin(), in.end(), inPlace.begin() + static_cast<long>(sc * es * r));
      c.allGather(inPlace.data() + sc * es * r, inPlace.data(), sc, t).wait();
      check(label("all_gather", t, ReduceOp::kSum, sc, true), r, inPlace, want, es);
    }
  }
}

// Several types, counts from smallCounts and a large one (not divisible by the world sizes),
// from every root.
void broadcastCases(Communicator& c, const std::string& algo = "", size_t large = 300007) {
  const int n = c.size(), r = c.rank();
  for (DataType t : {DataType::kF32, DataType::kF16, DataType::kI8, DataType::kI64}) {
    std::vector<size_t> counts = smallCounts(n);
    counts.push_back(large);
    for (size_t count : counts) {
      for (int root = 0; root < n; ++root) {
        Buffer want = makeInput(t, ReduceOp::kSum, root, count, 3);
        Buffer buf = r == root ? want : Buffer(want.size(), 0x5A);
        c.broadcast(buf.data(), count, t, root).wait();
        if (count > 0) expectAlgorithm(c, algo);
        check(label("broadcast", t, ReduceOp::kSum, count, true) + " root " + std::to_string(root),
              r, buf, want, sizeOf(t));
      }
    }
  }
}

TEST_P(Collectives, ReduceScatterEveryTypeAndOp) {
  expectRanks(
      size(), [](Communicator& c) { reduceScatterCases(c); }, options());
}

TEST_P(Collectives, AllGatherEveryType) {
  expectRanks(
      size(), [](Communicator& c) { allGatherCases(c); }, options());
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  expectRanks(
      size(), [](Communicator& c) { broadcastCases(c); }, options());
}

TEST_P(Collectives, BarrierAndManyInFlight) {
  expectRanks(
      size(),
      [&](Communicator& c) {
        for (int i = 0; i < 5; ++i) c.barrier().wait();
        // Several operations in flight at once complete in issue order with correct results.
        const int n = c.size();
        std::vector<Buffer> bufs;
        std::vector<Work> works;
        for (int k = 0; k < 6; ++k)
          bufs.push_back(makeInput(DataType::kI32, ReduceOp::kSum, c.rank(), 1000 + 97 * k, k));
        for (int k = 0; k < 6; ++k) {
          works.push_back(c.allReduce(bufs[k].data(), bufs[k].data(), 1000 + 97 * k, DataType::kI32,
                                      ReduceOp::kSum));
        }
        for (int k = 5; k >= 0; --k) works[k].wait();
        for (int k = 0; k < 6; ++k) {
          std::vector<Buffer> inputs;
          for (int q = 0; q < n; ++q) {
            inputs.push_back(makeInput(DataType::kI32, ReduceOp::kSum, q, 1000 + 97 * k, k));
          }
          check("in-flight allreduce " + std::to_string(k), c.rank(), bufs[k],
                reduceReference(DataType::kI32, ReduceOp::kSum, inputs, 1000 + 97 * k), 4);
        }
      },
      options());
}

TEST_P(Collectives, ResultsAreBitIdenticalAcrossRanks) {
  // Random floats (not exact): every rank must still hold the same bits.
  std::mutex mu;
  std::vector<Buffer> results(static_cast<size_t>(size()));
  const size_t count = 100000;
  expectRanks(
      size(),
      [&](Communicator& c) {
        std::vector<float> v(count);
        for (size_t i = 0; i < count; ++i) {
          v[i] = static_cast<float>(mix(i * 31 + static_cast<size_t>(c.rank())) % 100000) / 977.0f;
        }
        c.allReduce(std::span<float>(v), ReduceOp::kSum).wait();
        std::lock_guard<std::mutex> lock(mu);
        results[static_cast<size_t>(c.rank())] = Buffer(
            reinterpret_cast<uint8_t*>(v.data()), reinterpret_cast<uint8_t*>(v.data() + count));
      },
      options());
  for (size_t r = 1; r < results.size(); ++r) {
    EXPECT_EQ(results[r], results[0]) << "rank " << r << " differs from rank 0";
  }
}

std::vector<Param> params() {
  std::vector<Param> p;
  for (int n : {1, 2, 3, 4, 5, 8}) p.push_back({n, "auto", 512 * 1024});
  for (int n : {2, 3, 5}) p.push_back({n, "ring", 4096});  // many segments: deep pipelining
  for (int n : {3, 4, 5, 8}) p.push_back({n, "rd", 512 * 1024});
  for (int n : {2, 3, 4, 5, 8}) p.push_back({n, "rhd", 512 * 1024});
  for (int n : {4, 6}) p.push_back({n, "rhd", 4096});  // several segments per halving step
  for (int n : {2, 3, 4, 8}) p.push_back({n, "oneshot", 512 * 1024});
  for (int n : {2, 3, 5, 8}) p.push_back({n, "twoshot", 512 * 1024});
  p.push_back({3, "twoshot", 512 * 1024, "tcp"});
  // Small segments: several per half even at count 1031 (256 B: 9 for f32), so a segment goes
  // down a tree while later ones still go up, and links carry both trees' messages.
  for (int n : {1, 2, 3, 5}) p.push_back({n, "tree", 256});
  p.push_back({8, "tree", 1024});
  for (int n : {4, 6}) p.push_back({n, "tree", 512 * 1024});  // one segment per half
  p.push_back({5, "tree", 1024, "tcp"});
  for (int n : {2, 3, 5}) p.push_back({n, "auto", 512 * 1024, "tcp"});
  p.push_back({4, "ring", 4096, "tcp"});
  // Across hosts a block's segments grow to about a quarter of it (Options::tcpSegmentBytes):
  // with 4 KiB as the smallest, every large case here cuts its blocks into uneven quarters.
  p.push_back({5, "ring", 4096, "auto", "ABCDE"});
  // Hierarchical layouts: even (contiguous and interleaved ranks), uneven, one rank alone.
  for (const char* layout : {"AABB", "ABAB", "AAABBB", "AABBCCDD", "AAB", "ABBBA", "AABBBCC"}) {
    const int n = static_cast<int>(std::string(layout).size());
    p.push_back({n, "hier", 512 * 1024, "auto", layout});
  }
  p.push_back({6, "hier", 4096, "auto", "AAABBB"});  // segments within each phase
  p.push_back({4, "auto", 512 * 1024, "auto", "AABB"});
  p.push_back({4, "auto", 512 * 1024, "tcp", "AABB"});  // hierarchy over TCP only
  return p;
}

INSTANTIATE_TEST_SUITE_P(, Collectives, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& i) {
                           std::string name = "n" + std::to_string(i.param.size) + "_" +
                                              i.param.algo + "_seg" +
                                              std::to_string(i.param.segmentBytes);
                           if (std::string(i.param.transport) != "auto") {
                             name += std::string("_") + i.param.transport;
                           }
                           if (*i.param.layout) name += std::string("_") + i.param.layout;
                           return name;
                         });

// One collective's algorithm forced through CHORUS_ALGO ("broadcast=binomial"): only that
// collective's cases run, and each checks that the forced algorithm is the one that ran. The large
// counts are smaller than in Collectives (time): still many segments at the small segment sizes.
class ForcedAlgorithm : public Collectives {
 protected:
  std::string algo() const {
    const std::string s = GetParam().algo;
    return s.substr(s.find('=') + 1);
  }
};
class BroadcastAlgorithm : public ForcedAlgorithm {};
class ReduceScatterAlgorithm : public ForcedAlgorithm {};
class AllGatherAlgorithm : public ForcedAlgorithm {};

TEST_P(BroadcastAlgorithm, FromEveryRoot) {
  expectRanks(
      size(), [&](Communicator& c) { broadcastCases(c, algo(), 100003); }, options());
}

TEST_P(ReduceScatterAlgorithm, EveryTypeAndOp) {
  expectRanks(
      size(), [&](Communicator& c) { reduceScatterCases(c, algo()); }, options());
}

TEST_P(AllGatherAlgorithm, EveryType) {
  expectRanks(
      size(), [&](Communicator& c) { allGatherCases(c, algo(), 30011); }, options());
}

std::string forcedName(const ::testing::TestParamInfo<Param>& i) {
  const std::string algo = i.param.algo;
  std::string name = "n" + std::to_string(i.param.size) + "_" + algo.substr(algo.find('=') + 1) +
                     "_seg" + std::to_string(i.param.segmentBytes);
  if (std::string(i.param.transport) != "auto") name += std::string("_") + i.param.transport;
  return name;
}

std::vector<Param> broadcastParams() {
  std::vector<Param> p;
  for (int n : {1, 2, 3, 5, 8}) p.push_back({n, "broadcast=binomial", 512 * 1024});
  // Small segments: a segment is forwarded down the tree while later ones still arrive.
  p.push_back({5, "broadcast=binomial", 4096});
  for (int n : {2, 3, 5, 8}) p.push_back({n, "broadcast=scatter_allgather", 512 * 1024});
  // Several segments per block, in the scatter and in every ring step.
  p.push_back({5, "broadcast=scatter_allgather", 4096, "tcp"});
  p.push_back({3, "broadcast=chain", 4096});  // still listed first, and chosen for large buffers
  return p;
}

// Halving reduce-scatter and doubling all-gather: powers of two only. n = 8 with one segment per
// step runs in Collectives/n8_auto (the model picks them there for small buffers).
std::vector<Param> powerOfTwoParams(const char* setting, size_t severalSegmentsPerStep) {
  std::vector<Param> p;
  for (int n : {1, 2, 4}) p.push_back({n, setting, 512 * 1024});
  p.push_back({8, setting, severalSegmentsPerStep});
  p.push_back({4, setting, severalSegmentsPerStep, "tcp"});
  return p;
}
std::vector<Param> reduceScatterParams() { return powerOfTwoParams("reduce_scatter=halving", 256); }
std::vector<Param> allGatherParams() { return powerOfTwoParams("all_gather=doubling", 4096); }

INSTANTIATE_TEST_SUITE_P(, BroadcastAlgorithm, ::testing::ValuesIn(broadcastParams()), forcedName);
INSTANTIATE_TEST_SUITE_P(, ReduceScatterAlgorithm, ::testing::ValuesIn(reduceScatterParams()),
                         forcedName);
INSTANTIATE_TEST_SUITE_P(, AllGatherAlgorithm, ::testing::ValuesIn(allGatherParams()), forcedName);

// Halving and doubling need a power-of-two group: forced on three ranks, every rank's call
// fails at once with a clear error, and the communicator stays usable.
TEST(CollectivesForced, HalvingAndDoublingRefuseOtherWorldSizes) {
  Options o = testOptions();
  o.algorithm = parseAlgorithmSetting("reduce_scatter=halving,all_gather=doubling");
  expectRanks(
      3,
      [](Communicator& c) {
        std::vector<float> in(30, 1.0f), out(10);
        auto expectRefusal = [&](const char* what, const std::function<void()>& call) {
          try {
            call();
          } catch (const Error& e) {
            const std::string m = e.what();
            if (e.code() != ErrorCode::kInvalidArgument ||
                m.find("power-of-two") == std::string::npos || m.find(what) == std::string::npos) {
              throw;
            }
            return;
          }
          throw std::runtime_error(std::string(what) + " on 3 ranks was accepted");
        };
        expectRefusal("halving", [&] {
          c.reduceScatter(std::span<const float>(in), std::span<float>(out)).wait();
        });
        expectRefusal("doubling", [&] {
          c.allGather(std::span<const float>(out), std::span<float>(in)).wait();
        });
        std::fill(out.begin(), out.end(), 1.0f);
        c.allReduce(std::span<float>(out)).wait();
        if (out[0] != 3.0f) throw std::runtime_error("all-reduce after the refusals is wrong");
      },
      o);
}

TEST(CollectivesLarge, AllReduce64MiB) {
  for (int n : {2, 3, 4, 8}) {
    const size_t count = (64u << 20) / 4;
    expectRanks(n, [&](Communicator& c) {
      std::vector<int32_t> v(count);
      for (size_t i = 0; i < count; ++i)
        v[i] = static_cast<int32_t>(i * 3 + static_cast<size_t>(c.rank()));
      std::vector<int32_t> out(count);
      c.allReduce(std::span<const int32_t>(v), std::span<int32_t>(out)).wait();
      const int64_t rankSum = static_cast<int64_t>(n) * (n - 1) / 2;
      for (size_t i = 0; i < count; ++i) {
        int32_t want = static_cast<int32_t>(
            static_cast<uint32_t>(i * 3 * static_cast<size_t>(n) + static_cast<size_t>(rankSum)));
        if (out[i] != want) {
          throw std::runtime_error("64 MiB allreduce: element " + std::to_string(i) + " wrong");
        }
      }
    });
  }
}

}  // namespace
}  // namespace chorus::testing
