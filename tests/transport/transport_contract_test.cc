// What every link kind must provide to the algorithms, checked on the transport itself (no
// communicator above it): per-peer order, large and empty messages, both directions at once,
// a clear error when a peer dies or aborts, prompt interruption, and mismatch detection.
#include "transport_fixture.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

namespace chorus::transport {
namespace {

using namespace std::chrono_literals;
using testing::connectAll;
using testing::expectNoErrors;
using testing::runOnRanks;

class TransportContract : public ::testing::TestWithParam<std::string> {
 protected:
  std::vector<std::unique_ptr<Transport>> connect(int size,
                                                  std::chrono::milliseconds timeout = 10s) {
    return connectAll(size, GetParam(), timeout);
  }
};

// The byte a message carries at offset i: differs per sender, receiver, message and offset.
uint8_t patternByte(int from, int to, int message, size_t i) {
  return static_cast<uint8_t>((from * 131 + to * 31 + message * 7 + i * 13 + (i >> 8)) & 0xff);
}

std::vector<uint8_t> pattern(int from, int to, int message, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = patternByte(from, to, message, i);
  return v;
}

OpDesc op(uint64_t seq, CollectiveKind kind = CollectiveKind::kAllReduce, uint64_t count = 1) {
  OpDesc d = OpDesc::of(kind, count, DataType::kU8, ReduceOp::kSum);
  d.seq = seq;
  return d;
}

// Sizes of message `m` in the ordering test: empty, tiny, primes, and beyond a TCP stage.
size_t orderedSize(int m) {
  static const size_t sizes[] = {0, 1, 3, 17, 4099, 61, 0, 7919, 2, 65537};
  return sizes[m % (sizeof(sizes) / sizeof(sizes[0]))];
}

// Every rank sends many messages of varying sizes to every peer, all posted before any wait:
// each peer receives them in post order with their content intact.
TEST_P(TransportContract, ManyMessagesKeepPerPeerOrder) {
  for (int size : {2, 3, 5, 8}) {
    SCOPED_TRACE("world size " + std::to_string(size));
    const int messages = size <= 3 ? 120 : 30;  // fewer where ranks outnumber the cores
    auto txs = connect(size);
    expectNoErrors(runOnRanks(txs, [&](Transport& tx, int rank) {
      tx.beginOp(op(0));
      std::vector<Request> sends(static_cast<size_t>(size * messages));
      std::vector<Request> recvs(sends.size());
      std::vector<std::vector<uint8_t>> out(sends.size()), in(sends.size());
      for (int m = 0; m < messages; ++m) {
        for (int peer = 0; peer < size; ++peer) {
          if (peer == rank) continue;
          size_t k = static_cast<size_t>(peer * messages + m);
          size_t bytes = orderedSize(m + peer);
          in[k].assign(bytes, 0xee);
          tx.postRecv(recvs[k], peer, in[k].data(), bytes, static_cast<uint32_t>(m));
          out[k] = pattern(rank, peer, m, orderedSize(m + rank));
          tx.postSend(sends[k], peer, out[k].data(), out[k].size(), static_cast<uint32_t>(m));
        }
      }
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        for (int m = 0; m < messages; ++m) {
          size_t k = static_cast<size_t>(peer * messages + m);
          tx.wait(recvs[k], Deadline::after(10s));
          ASSERT_EQ(in[k], pattern(peer, rank, m, in[k].size())) << "from " << peer << " #" << m;
          tx.wait(sends[k], Deadline::after(10s));
        }
      }
    }));
  }
}

// A message of several MiB, of no round size, and an empty one, both ways at once.
TEST_P(TransportContract, LargeAndEmptyMessagesBothWaysAtOnce) {
  constexpr size_t kLarge = (5u << 20) + 4093;
  auto txs = connect(2);
  expectNoErrors(runOnRanks(txs, [&](Transport& tx, int rank) {
    const int peer = 1 - rank;
    for (uint64_t seq = 0; seq < 3; ++seq) {
      tx.beginOp(op(seq));
      auto out = pattern(rank, peer, static_cast<int>(seq), kLarge);
      std::vector<uint8_t> in(kLarge, 0);
      Request send, recv, emptySend, emptyRecv;
      uint8_t none = 0x5a;
      tx.postRecv(recv, peer, in.data(), in.size(), 0);
      tx.postRecv(emptyRecv, peer, &none, 0, 1);
      tx.postSend(send, peer, out.data(), out.size(), 0);
      tx.postSend(emptySend, peer, nullptr, 0, 1);
      tx.wait(recv, Deadline::after(10s));
      tx.wait(emptyRecv, Deadline::after(10s));
      tx.wait(send, Deadline::after(10s));
      tx.wait(emptySend, Deadline::after(10s));
      ASSERT_EQ(in, pattern(peer, rank, static_cast<int>(seq), kLarge));
      ASSERT_EQ(none, 0x5a);
    }
  }));
}

// A peer that closes its transport while this rank still waits for it: an error naming it.
TEST_P(TransportContract, PeerThatClosesIsNamed) {
  auto txs = connect(2);
  auto start = Clock::now();
  auto errors = runOnRanks(txs, [&](Transport& tx, int rank) {
    tx.beginOp(op(0));
    if (rank == 1) {
      tx.close();
      return;
    }
    uint8_t b[8];
    Request r;
    tx.postRecv(r, 1, b, sizeof(b), 0);
    try {
      tx.wait(r, Deadline::after(10s));
      ADD_FAILURE() << "the wait on a closed peer returned";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kPeerFailure) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
      // What is known, not a guess at the cause (a peer that failed closes the same way).
      EXPECT_NE(std::string(e.what()).find("closed its communicator or exited"), std::string::npos)
          << e.what();
    }
  });
  expectNoErrors(errors);
  EXPECT_LT(Clock::now() - start, 5s);
}

// A peer whose thread stops with the transport torn down (destroyed, no goodbye sent first).
TEST_P(TransportContract, PeerWhoseTransportIsDestroyedIsNamed) {
  auto txs = connect(2);
  auto start = Clock::now();
  auto errors = runOnRanks(txs, [&](Transport& tx, int rank) {
    tx.beginOp(op(0));
    if (rank == 1) {
      std::vector<uint8_t> half(1000, 1);
      Request s;
      tx.postSend(s, 0, half.data(), half.size(), 0);  // 0 waits for message 1, which never comes
      tx.wait(s, Deadline::after(10s));
      txs[1].reset();
      return;
    }
    std::vector<uint8_t> b(1000);
    Request first, second;
    tx.postRecv(first, 1, b.data(), b.size(), 0);
    tx.postRecv(second, 1, b.data(), b.size(), 1);
    try {
      // The first message arrived, but the error may surface in either wait: the transport
      // fails as soon as it sees the peer leave with a receive still posted.
      tx.wait(first, Deadline::after(10s));
      tx.wait(second, Deadline::after(10s));
      ADD_FAILURE() << "the wait on a destroyed peer returned";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kPeerFailure) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
  });
  expectNoErrors(errors);
  EXPECT_LT(Clock::now() - start, 5s);
}

// A peer that aborts: its reason and error code reach the rank that waits for it.
TEST_P(TransportContract, PeerAbortCarriesItsReason) {
  for (int size : {2, 3}) {
    SCOPED_TRACE("world size " + std::to_string(size));
    auto txs = connect(size);
    auto start = Clock::now();
    auto errors = runOnRanks(txs, [&](Transport& tx, int rank) {
      tx.beginOp(op(0));
      if (rank == size - 1) {
        tx.abort(Error(ErrorCode::kInvalidArgument, "the application gave up"));
        return;
      }
      uint8_t b[64];
      Request r;
      tx.postRecv(r, size - 1, b, sizeof(b), 0);
      try {
        tx.wait(r, Deadline::after(10s));
        ADD_FAILURE() << "the wait on an aborted peer returned";
      } catch (const Error& e) {
        std::string what = e.what();
        EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << what;
        EXPECT_NE(what.find("rank " + std::to_string(size - 1)), std::string::npos) << what;
        EXPECT_NE(what.find("the application gave up"), std::string::npos) << what;
      }
    });
    expectNoErrors(errors);
    EXPECT_LT(Clock::now() - start, 5s);
  }
}

// A chain of failures one call ahead: rank 2 fails in call B while rank 1 is still in call A;
// rank 1 finishes A (rank 2 sent all it owed for it) and fails at the start of B. Rank 0, still
// in A, must finish A too: rank 1 finished it, and its abort says it failed in B. Both then fail
// in B, naming a failed rank.
TEST_P(TransportContract, AbortAtTheStartOfACallLetsPeersFinishThePreviousOne) {
  auto txs = connect(3);
  const OpDesc a = op(1), b = op(3);
  std::atomic<bool> aborted[3] = {false, false, false};
  auto until = [&](int rank) {
    const auto limit = Clock::now() + 5s;
    while (!aborted[rank].load() && Clock::now() < limit) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(30ms);  // its abort is on its way to the peers
  };
  std::string failedInB[2];
  auto start = Clock::now();
  auto errors = runOnRanks(txs, [&](Transport& tx, int rank) {
    uint8_t out[8] = {1, 2, 3, 4, 5, 6, 7, 8}, in1[8], in2[8];
    Request s, r1, r2;
    tx.beginOp(a);
    if (rank == 2) {
      tx.postSend(s, 1, out, sizeof(out), 0);
      tx.wait(s, Deadline::after(10s));
      tx.beginOp(b);
      tx.abort(Error(ErrorCode::kInvalidArgument, "rank 2 gave up in call B"));
      aborted[2] = true;
      return;
    }
    if (rank == 1) {
      tx.postSend(s, 0, out, sizeof(out), 0);
      tx.wait(s, Deadline::after(10s));
      tx.postRecv(r2, 2, in2, sizeof(in2), 0);
      until(2);
      tx.wait(r2, Deadline::after(10s));  // rank 2's part of A, and then its abort from B
      Request s2;
      tx.postSend(s2, 0, out, sizeof(out), 1);
      tx.wait(s2, Deadline::after(10s));
    } else {
      tx.postRecv(r1, 1, in1, sizeof(in1), 0);
      tx.postRecv(r2, 1, in2, sizeof(in2), 1);
      tx.wait(r1, Deadline::after(10s));
      until(1);
      tx.wait(r2, Deadline::after(10s));  // rank 1's last message of A, then its abort from B
      EXPECT_EQ(std::memcmp(in2, out, sizeof(out)), 0);
    }
    // Call B: rank 2 failed in it (and rank 1 with it).
    try {
      tx.beginOp(b);
      Request rb;
      tx.postRecv(rb, rank == 1 ? 2 : 1, in1, sizeof(in1), 0);
      tx.wait(rb, Deadline::after(10s));
      ADD_FAILURE() << "rank " << rank << ": call B completed";
    } catch (const Error& e) {
      failedInB[rank] = e.what();
      if (rank == 1) tx.abort(e);
      aborted[rank] = true;
    }
  });
  expectNoErrors(errors);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(failedInB[r].find("rank 2 gave up in call B"), std::string::npos) << failedInB[r];
  }
  EXPECT_LT(Clock::now() - start, 8s);
}

// interrupt() from another thread ends a wait that nothing would complete, promptly.
TEST_P(TransportContract, InterruptEndsAWaitPromptly) {
  auto txs = connect(2);
  std::atomic<bool> waited{false};
  auto errors = runOnRanks(txs, [&](Transport& tx, int rank) {
    tx.beginOp(op(0));
    if (rank == 1) {
      // Stays connected and silent until rank 0 is done, so only the interrupt can end its wait.
      while (!waited.load()) std::this_thread::sleep_for(1ms);
      return;
    }
    uint8_t b[8];
    Request r;
    tx.postRecv(r, 1, b, sizeof(b), 0);
    std::thread interrupter([&] {
      std::this_thread::sleep_for(100ms);
      tx.interrupt();
    });
    auto start = Clock::now();
    try {
      tx.wait(r, Deadline::after(10s));
      ADD_FAILURE() << "an interrupted wait returned";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kAborted) << e.what();
    }
    EXPECT_LT(Clock::now() - start, 2s);
    interrupter.join();
    waited = true;
  });
  expectNoErrors(errors);
}

// Two ranks in different calls under the same sequence number: both fail with kMismatch, and
// the message names both calls (the rank that notices first aborts, as a communicator does).
TEST_P(TransportContract, MismatchNamesBothCalls) {
  auto txs = connect(2);
  auto errors = runOnRanks(txs, [&](Transport& tx, int rank) {
    OpDesc mine =
        rank == 0 ? op(0, CollectiveKind::kAllReduce, 10) : op(0, CollectiveKind::kBroadcast, 10);
    tx.beginOp(mine);
    const int peer = 1 - rank;
    uint8_t out[10] = {}, in[10];
    Request s, r;
    try {
      tx.postRecv(r, peer, in, sizeof(in), 0);
      tx.postSend(s, peer, out, sizeof(out), 0);
      tx.wait(r, Deadline::after(10s));
      tx.wait(s, Deadline::after(10s));
      ADD_FAILURE() << "rank " << rank << " did not notice the mismatch";
    } catch (const Error& e) {
      std::string what = e.what();
      EXPECT_EQ(e.code(), ErrorCode::kMismatch) << what;
      EXPECT_NE(what.find("allreduce"), std::string::npos) << what;
      EXPECT_NE(what.find("broadcast"), std::string::npos) << what;
      tx.abort(e);
    }
  });
  expectNoErrors(errors);
}

INSTANTIATE_TEST_SUITE_P(LinkKinds, TransportContract, ::testing::Values("tcp", "shm"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param;
                         });

}  // namespace
}  // namespace chorus::transport
