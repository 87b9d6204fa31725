// Frame and hello encoding: round trips and rejection of corrupt input.
#include "transport/frame.h"
#include "transport/tcp/hello.h"

#include <gtest/gtest.h>

#include <cstring>

namespace chorus::transport {
namespace {

FrameHeader sample() {
  FrameHeader h;
  h.kind = FrameKind::kData;
  h.op.seq = 0x0102030405060708ull;
  h.op.kind = CollectiveKind::kReduceScatter;
  h.op.dtype = DataType::kBF16;
  h.op.op = ReduceOp::kMax;
  h.op.algo = AlgorithmId::kRing;
  h.op.root = -7;
  h.op.count = 1000003;
  h.step = 77;
  h.bytes = 4096;
  return h;
}

TEST(Frame, RoundTripsEveryField) {
  uint8_t buf[kFrameHeaderBytes];
  encodeFrame(sample(), buf);
  std::string why;
  auto d = decodeFrame(buf, &why);
  ASSERT_TRUE(d) << why;
  EXPECT_EQ(d->kind, FrameKind::kData);
  EXPECT_TRUE(d->op.sameCall(sample().op));
  EXPECT_EQ(d->step, 77u);
  EXPECT_EQ(d->bytes, 4096u);
}

TEST(Frame, LayoutIsFixedLittleEndian) {
  uint8_t buf[kFrameHeaderBytes];
  encodeFrame(sample(), buf);
  EXPECT_EQ(std::memcmp(buf, "CHRS", 4), 0);
  EXPECT_EQ(buf[4], kWireVersion);
  EXPECT_EQ(buf[5], 1);   // data
  EXPECT_EQ(buf[16], 8);  // seq, least significant byte first
  EXPECT_EQ(buf[23], 1);
  EXPECT_EQ(buf[32], 77);  // step
}

TEST(Frame, RejectsCorruptHeaders) {
  uint8_t good[kFrameHeaderBytes];
  encodeFrame(sample(), good);
  struct Corruption {
    size_t offset;
    uint8_t value;
    const char* expect;
  };
  const Corruption cases[] = {{0, 'X', "magic"}, {4, 9, "version"}, {5, 0, "kind"},
                              {5, 5, "kind"},    {6, 200, "range"}, {7, 99, "range"},
                              {8, 77, "range"},  {9, 250, "range"}, {47, 0xff, "large"}};
  for (const auto& c : cases) {
    uint8_t buf[kFrameHeaderBytes];
    std::memcpy(buf, good, sizeof(buf));
    buf[c.offset] = c.value;
    std::string why;
    EXPECT_FALSE(decodeFrame(buf, &why)) << "offset " << c.offset;
    EXPECT_NE(why.find(c.expect), std::string::npos) << why;
  }
}

TEST(Frame, EveryAlgorithmTravelsAndNoneBeyond) {
  const auto last = static_cast<uint8_t>(kLastAlgorithmId);
  for (uint8_t v = 0; v <= last; ++v) {
    FrameHeader h = sample();
    h.op.algo = static_cast<AlgorithmId>(v);
    uint8_t buf[kFrameHeaderBytes];
    encodeFrame(h, buf);
    std::string why;
    auto d = decodeFrame(buf, &why);
    ASSERT_TRUE(d) << int{v} << ": " << why;
    EXPECT_EQ(d->op.algo, h.op.algo);
  }
  uint8_t buf[kFrameHeaderBytes];
  encodeFrame(sample(), buf);
  buf[9] = static_cast<uint8_t>(last + 1);
  std::string why;
  EXPECT_FALSE(decodeFrame(buf, &why));
}

TEST(Frame, AbortAndByeLengthsAreChecked) {
  FrameHeader h = sample();
  h.kind = FrameKind::kBye;
  h.bytes = 1;
  uint8_t buf[kFrameHeaderBytes];
  encodeFrame(h, buf);
  std::string why;
  EXPECT_FALSE(decodeFrame(buf, &why));
  h.kind = FrameKind::kAbort;
  h.bytes = 2;  // shorter than its error code
  encodeFrame(h, buf);
  EXPECT_FALSE(decodeFrame(buf, &why));
  h.bytes = 100;
  encodeFrame(h, buf);
  EXPECT_TRUE(decodeFrame(buf, &why)) << why;
}

TEST(OpDesc, DescribesCallsForMismatchMessages) {
  OpDesc d = sample().op;
  EXPECT_EQ(d.describe(), "reduce_scatter(count=1000003, bf16, max, ring)");
  d.kind = CollectiveKind::kBroadcast;
  EXPECT_NE(d.describe().find("root=-7"), std::string::npos);
  EXPECT_EQ(d.name(), "broadcast #36311929895191428");  // seq / 2: see OpDesc::seq
}

TEST(Hello, RoundTripsAndRejectsStrangers) {
  tcp::Hello h;
  h.kind = 1;
  for (size_t i = 0; i < h.job.size(); ++i) h.job[i] = static_cast<uint8_t>(i * 7);
  h.from = 5;
  h.to = 2;
  h.worldSize = 8;
  uint8_t buf[tcp::kHelloBytes];
  tcp::encodeHello(h, buf);
  std::string why;
  auto d = tcp::decodeHello(buf, &why);
  ASSERT_TRUE(d) << why;
  EXPECT_EQ(d->job, h.job);
  EXPECT_EQ(d->from, 5);
  EXPECT_EQ(d->to, 2);
  EXPECT_EQ(d->worldSize, 8);
  buf[0] = 'G';  // e.g. an HTTP client
  EXPECT_FALSE(tcp::decodeHello(buf, &why));
  tcp::encodeHello(h, buf);
  buf[4] = 2;
  EXPECT_FALSE(tcp::decodeHello(buf, &why));
  EXPECT_NE(why.find("version"), std::string::npos);
}

}  // namespace
}  // namespace chorus::transport
