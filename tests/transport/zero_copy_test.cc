// MSG_ZEROCOPY sends (Options::tcp, CHORUS_TCP_ZEROCOPY_BYTES): a send completes only once the
// kernel has let go of the caller's pages, so a buffer overwritten as soon as its send completes
// never changes what the peer receives, for every size around the threshold; and a socket that
// refuses zero-copy, or a kernel that copies anyway, still delivers every byte.
#include "transport/tcp/zero_copy.h"
#include "transport_fixture.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace chorus::transport {
namespace {

using namespace std::chrono_literals;
using testing::connectAll;
using testing::expectNoErrors;
using testing::runOnRanks;

constexpr size_t kThreshold = 64 * 1024;

// Zero-copy sends from minBytes, set in code.
Options zeroCopyOptions(size_t minBytes, bool keep) {
  Options o;
  o.tcp.zeroCopyBytes = minBytes;
  o.tcp.zeroCopyKeep = keep;
  return o;
}

// Sets the zero-copy variables while it lives (for Options::fromEnv).
class ZeroCopyEnv {
 public:
  ZeroCopyEnv(size_t minBytes, bool keep) {
    setenv("CHORUS_TCP_ZEROCOPY_BYTES", std::to_string(minBytes).c_str(), 1);
    setenv("CHORUS_TCP_ZEROCOPY_KEEP", keep ? "1" : "0", 1);
  }
  ~ZeroCopyEnv() {
    unsetenv("CHORUS_TCP_ZEROCOPY_BYTES");
    unsetenv("CHORUS_TCP_ZEROCOPY_KEEP");
    tcp::refuseZeroCopyForTesting(false);
  }
};

OpDesc op(uint64_t seq) {
  OpDesc d = OpDesc::of(CollectiveKind::kAllReduce, 1, DataType::kU8, ReduceOp::kSum);
  d.seq = seq;
  return d;
}

uint8_t byteOf(int from, int message, size_t i) {
  return static_cast<uint8_t>((from * 101 + message * 37 + i * 7 + (i >> 12)) & 0xff);
}

// Sizes around the threshold, and messages larger than both sockets' buffers together.
const size_t kSizes[] = {kThreshold - 1,     kThreshold,     kThreshold + 1, 4096,
                         3 * kThreshold + 5, (1u << 20) + 3, (9u << 20) + 1};
constexpr int kMessages = 2 * static_cast<int>(sizeof(kSizes) / sizeof(kSizes[0]));

size_t sizeOf(int m) {
  return kSizes[static_cast<size_t>(m) % (sizeof(kSizes) / sizeof(kSizes[0]))];
}

// Both ranks stream kMessages to each other from one buffer, overwriting it the moment each
// send completes; the receivers start late, so that sent data waits in full socket buffers
// while its sender scribbles over the source. Every message must arrive as it was sent.
void exchangeAndScribble(std::vector<std::unique_ptr<Transport>>& txs) {
  expectNoErrors(runOnRanks(txs, [&](Transport& tx, int rank) {
    const int peer = 1 - rank;
    tx.beginOp(op(0));
    std::vector<uint8_t> out((9u << 20) + 1);
    std::vector<std::vector<uint8_t>> in(static_cast<size_t>(kMessages));
    std::vector<Request> recvs(static_cast<size_t>(kMessages));
    Request send;
    for (int m = 0; m < kMessages; ++m) {
      const size_t bytes = sizeOf(m);
      for (size_t i = 0; i < bytes; ++i) out[i] = byteOf(rank, m, i);
      tx.postSend(send, peer, out.data(), bytes, static_cast<uint32_t>(m));
      if (m == 2) {
        std::this_thread::sleep_for(100ms);  // let the peer's buffers fill
        for (int k = 0; k < kMessages; ++k) {
          in[static_cast<size_t>(k)].assign(sizeOf(k), 0xee);
          tx.postRecv(recvs[static_cast<size_t>(k)], peer, in[static_cast<size_t>(k)].data(),
                      sizeOf(k), static_cast<uint32_t>(k));
        }
      }
      tx.wait(send, Deadline::after(30s));
      std::memset(out.data(), 0xa5, bytes);  // the kernel must not send this
    }
    for (int k = 0; k < kMessages; ++k) {
      tx.wait(recvs[static_cast<size_t>(k)], Deadline::after(30s));
      const auto& got = in[static_cast<size_t>(k)];
      for (size_t i = 0; i < got.size(); ++i) {
        if (got[i] != byteOf(peer, k, i)) {
          ADD_FAILURE() << "rank " << rank << " message " << k << " (" << got.size()
                        << " bytes) differs at byte " << i;
          break;
        }
      }
    }
  }));
}

TEST(ZeroCopy, BufferOverwrittenAfterSendCompletesNeverReachesThePeer) {
  const uint64_t before = tcp::zeroCopyCallsForTesting();
  auto txs = connectAll(2, "tcp", 30s, zeroCopyOptions(kThreshold, /*keep=*/true));
  exchangeAndScribble(txs);
  // The test means something only if zero-copy was used (Linux has had it since 4.14).
  EXPECT_GT(tcp::zeroCopyCallsForTesting(), before);
}

// The variables reach the links through Options::fromEnv.
TEST(ZeroCopy, SettingsFromTheEnvironmentReachTheLinks) {
  ZeroCopyEnv env(kThreshold, /*keep=*/true);
  const Options fromEnv = Options::fromEnv();
  EXPECT_EQ(fromEnv.tcp.zeroCopyBytes, kThreshold);
  EXPECT_TRUE(fromEnv.tcp.zeroCopyKeep);
  const uint64_t before = tcp::zeroCopyCallsForTesting();
  auto txs = connectAll(2, "tcp", 30s, fromEnv);
  exchangeAndScribble(txs);
  EXPECT_GT(tcp::zeroCopyCallsForTesting(), before);
}

// Off by default: no MSG_ZEROCOPY call at all.
TEST(ZeroCopy, OffByDefault) {
  const uint64_t before = tcp::zeroCopyCallsForTesting();
  auto txs = connectAll(2, "tcp", 30s);
  exchangeAndScribble(txs);
  EXPECT_EQ(tcp::zeroCopyCallsForTesting(), before);
}

TEST(ZeroCopy, SocketThatCopiesAnywayGoesBackToOrdinarySendsAndDelivers) {
  auto txs = connectAll(2, "tcp", 30s, zeroCopyOptions(kThreshold, /*keep=*/false));
  exchangeAndScribble(txs);
}

TEST(ZeroCopy, SocketThatRefusesZeroCopyStillDelivers) {
  ZeroCopyEnv env(kThreshold, /*keep=*/true);  // its destructor lets sockets accept it again
  tcp::refuseZeroCopyForTesting(true);
  const uint64_t before = tcp::zeroCopyCallsForTesting();
  auto txs = connectAll(2, "tcp", 30s, zeroCopyOptions(kThreshold, /*keep=*/true));
  exchangeAndScribble(txs);
  EXPECT_EQ(tcp::zeroCopyCallsForTesting(), before);
}

TEST(ZeroCopy, MalformedSettingIsRefusedNamingTheVariable) {
  setenv("CHORUS_TCP_ZEROCOPY_BYTES", "lots", 1);
  try {
    (void)Options::fromEnv();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CHORUS_TCP_ZEROCOPY_BYTES"), std::string::npos)
        << e.what();
  }
  unsetenv("CHORUS_TCP_ZEROCOPY_BYTES");
}

}  // namespace
}  // namespace chorus::transport
