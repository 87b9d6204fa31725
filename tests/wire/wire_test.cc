// Reduced-precision wire formats of the f32 all-reduce: results against the independent
// reference of wire_reference.h (same roundings, same order), identical bits on every rank, an
// error bound against the exact sum, the argument checks, mismatched formats, the C API, the
// bytes that go on the wire, and the algorithm choice.
#include "wire_reference.h"

#include "algo/select.h"
#include "harness/outcomes.h"
#include "harness/thread_ranks.h"
#include "reduce/reduce.h"
#include "transport/frame.h"

#include <chorus/chorus.h>
#include <chorus/chorus.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace chorus {
namespace {

using testing::expectRanks;
using testing::testOptions;
using wiretest::allReduceReference;
using wiretest::wireInput;

// Bit-identical, for any count: memcmp's pointers must not be null even for 0 bytes, and an empty
// vector's data() is.
bool sameBits(const std::vector<float>& got, const std::vector<float>& want, size_t count) {
  return count == 0 || std::memcmp(got.data(), want.data(), count * sizeof(float)) == 0;
}

constexpr WireFormat kWires[] = {WireFormat::kBf16, WireFormat::kFp16, WireFormat::kInt8Block};

std::vector<std::vector<float>> allInputs(int n, size_t count, uint32_t salt) {
  std::vector<std::vector<float>> in;
  for (int r = 0; r < n; ++r) in.push_back(wireInput(r, count, salt));
  return in;
}

// Every format, counts 0, 1, primes (none a multiple of 256 or of the world size) and segment
// sizes that cut blocks into several segments, in place and not.
void checkAgainstReference(int n, bool bothWays,
                           const std::vector<size_t>& segments = {1024, 4096, 512 * 1024}) {
  const std::vector<size_t> counts = {0, 1, 7, 1031, 5003};
  for (size_t seg : segments) {
    Options o = testOptions();
    o.segmentBytes = seg;
    o.tuning.ringBidirectionalBytes = bothWays ? 1.0 : 0.0;
    expectRanks(
        n,
        [&](Communicator& c) {
          uint32_t salt = 0;
          for (WireFormat w : kWires) {
            for (size_t count : counts) {
              for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
                ++salt;
                SCOPED_TRACE(std::string(toString(w)) + " " + std::string(toString(op)) +
                             " count " + std::to_string(count) + " segment " + std::to_string(seg) +
                             " rank " + std::to_string(c.rank()));
                const auto in = allInputs(n, count, salt);
                const auto want = allReduceReference(w, op, seg, in, count, bothWays && n >= 3);
                std::vector<float> got(count, -1.0f);
                const bool inPlace = salt % 2 == 0;
                if (inPlace) got = in[static_cast<size_t>(c.rank())];
                c.allReduce(inPlace ? got.data() : in[static_cast<size_t>(c.rank())].data(),
                            got.data(), count, DataType::kF32, op, CallOptions{w})
                    .wait();
                ASSERT_TRUE(sameBits(got, want, count))
                    << "first difference at "
                    << std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin();
              }
            }
          }
        },
        o);
  }
}

TEST(Wire, MatchesReferenceOneRank) { checkAgainstReference(1, false); }
TEST(Wire, MatchesReferenceTwoRanks) { checkAgainstReference(2, false); }
TEST(Wire, MatchesReferenceThreeRanks) { checkAgainstReference(3, false); }
TEST(Wire, MatchesReferenceFiveRanks) { checkAgainstReference(5, false, {1024, 512 * 1024}); }
TEST(Wire, MatchesReferenceEightRanks) { checkAgainstReference(8, false, {2048}); }
// The ring that runs both ways round: each half carries the format on its own.
TEST(Wire, MatchesReferenceBothWays) { checkAgainstReference(3, true); }

// The conversions of every instruction set this CPU has give the same bits (the scalar path too).
TEST(Wire, SameBitsOnEveryInstructionSet) {
  for (const char* isa : {"scalar", "avx2", "avx512"}) {
    if (!reduce::setIsaForTesting(isa)) continue;
    SCOPED_TRACE(isa);
    checkAgainstReference(3, false, {1024});
  }
  reduce::setIsaForTesting("auto");
}

// Against the exact sum: each of the n roundings of a value is within half a unit of its format
// (relative 2^-8 for bf16, 2^-11 for fp16; for int8, half a scale: |partial sum| / 254).
TEST(Wire, ErrorBoundAgainstExactSum) {
  const int n = 5;
  const size_t count = 4099;
  expectRanks(n, [&](Communicator& c) {
    const auto in = allInputs(n, count, 77);
    for (WireFormat w : kWires) {
      std::vector<float> got(count);
      c.allReduce(in[static_cast<size_t>(c.rank())].data(), got.data(), count, DataType::kF32,
                  ReduceOp::kSum, CallOptions{w})
          .wait();
      double worst = 0;
      for (size_t i = 0; i < count; ++i) {
        double exact = 0, mass = 0;
        for (int r = 0; r < n; ++r) {
          exact += in[static_cast<size_t>(r)][i];
          mass += std::fabs(in[static_cast<size_t>(r)][i]);
        }
        worst = std::max(worst, std::fabs(got[i] - exact) / mass);
      }
      // int8: the scale is set by the block's largest partial sum; inputs span 2^-4..2^5.
      const double unit = w == WireFormat::kBf16   ? std::ldexp(1.0, -8)
                          : w == WireFormat::kFp16 ? std::ldexp(1.0, -11)
                                                   : 1.0 / 254 * 32 * n;
      EXPECT_LE(worst, n * unit) << toString(w);
      EXPECT_GT(worst, 0.0) << toString(w) << ": no rounding at all?";
    }
  });
}

// The format travels in byte 10 of every frame header; an unknown value is a corrupt header.
TEST(Wire, FrameCarriesTheFormat) {
  transport::FrameHeader h;
  h.op = OpDesc::of(CollectiveKind::kAllReduce, 10, DataType::kF32, ReduceOp::kSum);
  h.op.wire = WireFormat::kInt8Block;
  uint8_t bytes[transport::kFrameHeaderBytes];
  transport::encodeFrame(h, bytes);
  EXPECT_EQ(bytes[10], 3);
  std::string why;
  auto back = transport::decodeFrame(bytes, &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->op.wire, WireFormat::kInt8Block);
  EXPECT_TRUE(back->op.sameCall(h.op));
  OpDesc native = h.op;
  native.wire = WireFormat::kNative;
  EXPECT_FALSE(native.sameCall(h.op));
  EXPECT_NE(h.op.describe().find("wire=int8"), std::string::npos) << h.op.describe();
  bytes[10] = 4;
  EXPECT_FALSE(transport::decodeFrame(bytes, &why));
}

TEST(Wire, ParseAndNames) {
  EXPECT_EQ(parseWireFormat("bf16"), WireFormat::kBf16);
  EXPECT_EQ(parseWireFormat("fp16"), WireFormat::kFp16);
  EXPECT_EQ(parseWireFormat("int8"), WireFormat::kInt8Block);
  EXPECT_EQ(parseWireFormat("native"), WireFormat::kNative);
  try {
    parseWireFormat("fp8");
    FAIL() << "fp8 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("native, bf16, fp16, int8"), std::string::npos);
  }
}

TEST(Wire, BadTypeOrOpRejected) {
  expectRanks(2, [](Communicator& c) {
    std::vector<double> d(10, 1.0);
    std::vector<float> f(10, 1.0f);
    auto expectInvalid = [](const std::function<void()>& call, const std::string& words) {
      try {
        call();
        ADD_FAILURE() << "accepted: " << words;
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
        EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      }
    };
    expectInvalid(
        [&] {
          c.allReduce(d.data(), d.data(), d.size(), DataType::kF64, ReduceOp::kSum,
                      CallOptions{WireFormat::kBf16});
        },
        "wire format bf16 needs dtype f32 (got f64)");
    expectInvalid(
        [&] {
          c.allReduce(f.data(), f.data(), f.size(), DataType::kF32, ReduceOp::kMax,
                      CallOptions{WireFormat::kInt8Block});
        },
        "wire format int8 needs op sum or avg (got max)");
    // The communicator is still usable: nothing was issued.
    c.allReduce(std::span<float>(f), ReduceOp::kSum, CallOptions{WireFormat::kFp16}).wait();
    EXPECT_EQ(f[0], 2.0f);
  });
}

TEST(Wire, MismatchedFormatsReported) {
  auto res = testing::outcomes(
      2,
      [](Communicator& c) {
        std::vector<float> v(1000, 1.0f);
        const WireFormat w = c.rank() == 0 ? WireFormat::kBf16 : WireFormat::kNative;
        c.allReduce(std::span<float>(v), ReduceOp::kSum, CallOptions{w}).wait();
      },
      testOptions(std::chrono::seconds(5)), testing::ProbeLater::kNo);
  for (size_t r = 0; r < res.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + res[r].message);
    EXPECT_EQ(res[r].code, ErrorCode::kMismatch);
    EXPECT_NE(res[r].message.find("wire=bf16"), std::string::npos);
  }
}

// Ring all-reduce: each rank sends every block but its own in the reduce-scatter and every block
// but its successor's in the all-gather, 2 (n - 1) / n of the wire size give or take a block.
TEST(Wire, BytesSentCountsWireBytes) {
  const int n = 4;
  const size_t count = 100003;
  Options o = testOptions();
  o.tuning.ringBidirectionalBytes = 0;
  expectRanks(
      n,
      [&](Communicator& c) {
        std::vector<float> v(count, 1.0f);
        for (WireFormat w : {WireFormat::kNative, WireFormat::kBf16, WireFormat::kInt8Block}) {
          const uint64_t before = c.bytesSent();
          c.allReduce(v.data(), v.data(), count, DataType::kF32, ReduceOp::kSum, CallOptions{w},
                      Run::kBlocking);
          EXPECT_EQ(c.lastAlgorithm(), "ring");
          const double sent = static_cast<double>(c.bytesSent() - before);
          const double perValue = w == WireFormat::kNative ? 4.0
                                  : w == WireFormat::kBf16 ? 2.0
                                                           : 1.0 + 4.0 / 256;
          const double expected = 2.0 * (n - 1) / n * perValue * static_cast<double>(count);
          EXPECT_NEAR(sent, expected, expected * 0.002) << toString(w);
        }
      },
      o);
}

TEST(Wire, CApi) {
  chorus::TcpStoreServer server("127.0.0.1", 0);
  const std::string url = "tcp://127.0.0.1:" + std::to_string(server.port());
  const int n = 3;
  const size_t count = 1031;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      chorus_options o{};
      o.struct_size = sizeof(o);
      o.timeout_ms = 20000;
      chorus_comm* comm = nullptr;
      ASSERT_EQ(chorus_comm_init_with_options(url.c_str(), r, n, &o, &comm), CHORUS_OK);
      const auto in = allInputs(n, count, 5);
      uint64_t before = 0, after = 0;
      ASSERT_EQ(chorus_comm_bytes_sent(comm, &before), CHORUS_OK);
      std::vector<float> got(count);
      const chorus_collective_options bf16{sizeof(chorus_collective_options), CHORUS_WIRE_BF16};
      EXPECT_EQ(chorus_all_reduce_with_options(comm, in[static_cast<size_t>(r)].data(), got.data(),
                                               count, CHORUS_DTYPE_F32, CHORUS_OP_SUM, &bf16),
                CHORUS_OK);
      auto want =
          allReduceReference(WireFormat::kBf16, ReduceOp::kSum, 512 * 1024, in, count, false);
      EXPECT_TRUE(sameBits(got, want, count)) << "rank " << r;
      ASSERT_EQ(chorus_comm_bytes_sent(comm, &after), CHORUS_OK);
      EXPECT_GT(after, before);
      EXPECT_LT(after - before, 2 * count * 2);
      chorus_request* req = nullptr;
      const chorus_collective_options int8{sizeof(chorus_collective_options), CHORUS_WIRE_INT8};
      EXPECT_EQ(
          chorus_iall_reduce_with_options(comm, in[static_cast<size_t>(r)].data(), got.data(),
                                          count, CHORUS_DTYPE_F32, CHORUS_OP_AVG, &int8, &req),
          CHORUS_OK);
      EXPECT_EQ(chorus_request_wait(req), CHORUS_OK);
      want =
          allReduceReference(WireFormat::kInt8Block, ReduceOp::kAvg, 512 * 1024, in, count, false);
      EXPECT_TRUE(sameBits(got, want, count)) << "rank " << r;
      // NULL options: native.
      EXPECT_EQ(chorus_all_reduce_with_options(comm, in[static_cast<size_t>(r)].data(), got.data(),
                                               count, CHORUS_DTYPE_F32, CHORUS_OP_SUM, nullptr),
                CHORUS_OK);
      // Rejected before anything is sent: the communicator stays usable.
      std::vector<int32_t> ints(10, 1);
      EXPECT_EQ(chorus_all_reduce_with_options(comm, ints.data(), ints.data(), 10, CHORUS_DTYPE_I32,
                                               CHORUS_OP_SUM, &bf16),
                CHORUS_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(chorus_last_error(comm)).find("i32"), std::string::npos);
      EXPECT_EQ(chorus_comm_bytes_sent(comm, nullptr), CHORUS_ERR_INVALID_ARGUMENT);
      EXPECT_EQ(chorus_all_reduce_with_options(comm, ints.data(), ints.data(), 10, CHORUS_DTYPE_I32,
                                               CHORUS_OP_SUM, nullptr),
                CHORUS_OK);
      EXPECT_EQ(ints[0], 3);
      EXPECT_EQ(chorus_comm_destroy(comm), CHORUS_OK);
    });
  }
  for (auto& t : threads) t.join();
}

// Only the ring carries a format: the model gives the others no estimate, a forced one falls
// back to the ring and the debug line says so, and the ring with fewer bytes is predicted faster
// on a network link.
TEST(Wire, ChoiceFallsBackToRingAndSaysSo) {
  Options o = testOptions();
  const algo::Placement hosts{4, 1, true, true};
  o.algorithm = parseAlgorithmSetting("tree");
  algo::Choice c = algo::chooseAlgorithm(CollectiveKind::kAllReduce, 1 << 20, DataType::kF32, 4,
                                         hosts, o, WireFormat::kBf16);
  EXPECT_EQ(c.algo, AlgorithmId::kRing);
  OpDesc d = OpDesc::of(CollectiveKind::kAllReduce, 1 << 18, DataType::kF32, ReduceOp::kSum);
  d.wire = WireFormat::kBf16;
  const std::string line = algo::explain(d, 4, hosts, c);
  EXPECT_NE(line.find("wire bf16: tree cannot carry it, ring instead"), std::string::npos) << line;

  o.algorithm = parseAlgorithmSetting("auto");
  c = algo::chooseAlgorithm(CollectiveKind::kAllReduce, 64, DataType::kF32, 8, hosts, o,
                            WireFormat::kInt8Block);
  EXPECT_EQ(c.algo, AlgorithmId::kRing);  // also where rd would win natively
  ASSERT_EQ(c.candidates.size(), 1u);

  for (WireFormat w : kWires) {
    const double native =
        algo::predictSeconds(CollectiveKind::kAllReduce, AlgorithmId::kRing, 64 << 20,
                             DataType::kF32, 4, hosts, o.tuning, o.segmentBytes);
    const double wired =
        algo::predictSeconds(CollectiveKind::kAllReduce, AlgorithmId::kRing, 64 << 20,
                             DataType::kF32, 4, hosts, o.tuning, o.segmentBytes, w);
    EXPECT_LT(wired, native * 0.7) << toString(w);
  }
}

// A forced algorithm that cannot carry the format runs the ring instead, with the same result.
TEST(Wire, ForcedAlgorithmFallsBack) {
  Options o = testOptions();
  o.algorithm = parseAlgorithmSetting("rhd");
  o.tuning.ringBidirectionalBytes = 0;
  const int n = 4;
  const size_t count = 3001;
  expectRanks(
      n,
      [&](Communicator& c) {
        const auto in = allInputs(n, count, 9);
        std::vector<float> got(count);
        c.allReduce(in[static_cast<size_t>(c.rank())].data(), got.data(), count, DataType::kF32,
                    ReduceOp::kSum, CallOptions{WireFormat::kBf16})
            .wait();
        EXPECT_EQ(c.lastAlgorithm(), "ring");
        const auto want =
            allReduceReference(WireFormat::kBf16, ReduceOp::kSum, o.segmentBytes, in, count, false);
        EXPECT_TRUE(sameBits(got, want, count));
      },
      o);
}

}  // namespace
}  // namespace chorus
