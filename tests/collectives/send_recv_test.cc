// Send and recv between two thread-ranks: every dtype and awkward sizes, pairs in any order
// interleaved with collectives that every rank runs, ranks that take no part staying in step,
// mismatched sizes, a departed peer, bad arguments and the C API.
#include "collectives/reference.h"
#include "harness/thread_ranks.h"

#include <chorus/chorus.h>
#include <chorus/store.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace chorus::testing {
namespace {

constexpr DataType kTypes[] = {DataType::kF32, DataType::kF64, DataType::kF16, DataType::kBF16,
                               DataType::kI8,  DataType::kU8,  DataType::kI32, DataType::kI64};

// Every ordered pair (a, b) in one global order, each with a few sizes; after each sender an
// all-reduce over everyone. Ranks outside a pair do nothing for it.
TEST(SendRecv, EveryPairEveryTypeBetweenCollectives) {
  for (int n : {2, 3, 5, 8}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    expectRanks(n, [n](Communicator& c) {
      const int me = c.rank();
      for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) {
          if (a == b || (me != a && me != b)) continue;
          const DataType t = kTypes[static_cast<size_t>(a * n + b) % 8];
          for (size_t count : {size_t{0}, size_t{1}, size_t{1031}}) {
            const Buffer want = makeInput(t, ReduceOp::kSum, a, count, static_cast<uint32_t>(b));
            if (me == a) {
              c.send(want.data(), count, t, b).wait();
            } else {
              Buffer got(want.size(), 0xAB);
              c.recv(got.data(), count, t, a).wait();
              if (firstDifference(got.data(), want.data(), count, sizeOf(t)) >= 0) {
                throw std::runtime_error("message " + std::to_string(a) + " -> " +
                                         std::to_string(b) + " " + std::string(toString(t)) +
                                         " count " + std::to_string(count) + " differs");
              }
            }
          }
        }
        int32_t x = 1;
        c.allReduce(std::span<int32_t>(&x, 1)).wait();
        if (x != n) throw std::runtime_error("all-reduce between sends gave " + std::to_string(x));
      }
    });
  }
}

// Non-blocking: many messages of different sizes on one pair between two collectives, issued
// before any is waited for; a third rank runs only the collectives.
TEST(SendRecv, ManyMessagesInFlightOfDifferentSizes) {
  expectRanks(3, [](Communicator& c) {
    const int me = c.rank();
    constexpr int kMessages = 20;
    std::vector<std::vector<int64_t>> bufs(kMessages);
    std::vector<Work> works;
    for (int k = 0; k < kMessages; ++k) {
      const size_t len = static_cast<size_t>(k * 37 % 11);
      bufs[static_cast<size_t>(k)].assign(len, me == 0 ? 1000 * k : -1);
      if (me == 0)
        works.push_back(c.send(std::span<const int64_t>(bufs[static_cast<size_t>(k)]), 2));
      if (me == 2) works.push_back(c.recv(std::span<int64_t>(bufs[static_cast<size_t>(k)]), 0));
    }
    float x = 1.0f;
    works.push_back(c.allReduce(std::span<float>(&x, 1)));
    for (auto& w : works) w.wait();
    if (x != 3.0f) throw std::runtime_error("all-reduce after the messages");
    for (int k = 0; me == 2 && k < kMessages; ++k) {
      for (int64_t v : bufs[static_cast<size_t>(k)]) {
        if (v != 1000 * k) throw std::runtime_error("message " + std::to_string(k) + " differs");
      }
    }
  });
}

// Large messages go both ways when one side sends first and the other receives first, over
// shared memory and over TCP.
TEST(SendRecv, LargeExchange) {
  for (const char* transport : {"auto", "tcp"}) {
    SCOPED_TRACE(transport);
    Options o = testOptions();
    o.transport = parseTransportKind(transport);
    expectRanks(
        2,
        [](Communicator& c) {
          const int me = c.rank(), other = 1 - me;
          std::vector<float> out(3 << 20, static_cast<float>(me + 1)), in(out.size(), 0.0f);
          if (me == 0) {
            c.send(std::span<const float>(out), other).wait();
            c.recv(std::span<float>(in), other).wait();
          } else {
            c.recv(std::span<float>(in), other).wait();
            c.send(std::span<const float>(out), other).wait();
          }
          for (float v : in) {
            if (v != static_cast<float>(other + 1)) throw std::runtime_error("wrong data");
          }
        },
        o);
  }
}

// Both ranks post their receive first and their send second, without waiting in between (torch's
// batch_isend_irecv with the receive listed first): the sends queued behind the receives run
// with them. Small and larger than the transport buffers, over shared memory and TCP; and a send
// issued only after a pause, while the receive already waits.
TEST(SendRecv, ReceiveFirstOnBothRanks) {
  for (const char* transport : {"auto", "tcp"}) {
    SCOPED_TRACE(transport);
    Options o = testOptions(std::chrono::seconds(10));
    o.transport = parseTransportKind(transport);
    expectRanks(
        2,
        [](Communicator& c) {
          const int me = c.rank(), other = 1 - me;
          for (size_t count : {size_t{3}, size_t{3} << 20}) {
            std::vector<int32_t> out(count, me + 1), in(count, 0);
            Work r = c.recv(std::span<int32_t>(in), other);
            Work s = c.send(std::span<const int32_t>(out), other);
            r.wait();
            s.wait();
            for (int32_t v : in) {
              if (v != other + 1) throw std::runtime_error("wrong data");
            }
          }
          std::vector<int64_t> out(5, 7 * (me + 1)), in(5, 0);
          Work r = c.recv(std::span<int64_t>(in), other);
          std::this_thread::sleep_for(std::chrono::milliseconds(150));
          c.send(std::span<const int64_t>(out), other).wait();
          r.wait();
          if (in[4] != 7 * (other + 1)) throw std::runtime_error("wrong data after a pause");
          float x = 1.0f;  // still in step for the collectives that follow
          c.allReduce(std::span<float>(&x, 1)).wait();
          if (x != 2.0f) throw std::runtime_error("all-reduce after the messages");
        },
        o);
  }
}

TEST(SendRecv, MismatchedSizesAndDepartedPeers) {
  // The receiver expects more than was sent: it fails with kMismatch naming the sizes.
  auto errors = runRanks(2, [](Communicator& c) {
    std::vector<float> v(c.rank() == 0 ? 5 : 6);
    try {
      if (c.rank() == 0) {
        c.send(std::span<const float>(v), 1).wait();
      } else {
        c.recv(std::span<float>(v), 0).wait();
      }
    } catch (const Error& e) {
      if (c.rank() == 1 && e.code() == ErrorCode::kMismatch &&
          std::string(e.what()).find("20 bytes") != std::string::npos) {
        return;
      }
      throw;
    }
    if (c.rank() == 1) throw std::runtime_error("the mismatched receive succeeded");
  });
  for (const auto& e : errors) ADD_FAILURE() << e;

  // A peer that leaves before sending is named, promptly.
  auto t0 = std::chrono::steady_clock::now();
  errors = runRanks(
      3,
      [](Communicator& c) {
        if (c.rank() == 1) return;
        if (c.rank() == 2) return;  // takes no part
        float x = 0;
        try {
          c.recv(std::span<float>(&x, 1), 1).wait();
        } catch (const Error& e) {
          if (e.code() == ErrorCode::kPeerFailure &&
              std::string(e.what()).find("rank 1") != std::string::npos) {
            return;
          }
          throw;
        }
        throw std::runtime_error("a receive from a departed rank succeeded");
      },
      testOptions(std::chrono::seconds(30)));
  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
}

// Rank 1 forgets the recv and runs the next collective: the message it gets first is rank 0's,
// which belongs to a send, and it reports a mismatch naming it; the others fail too, no hang.
TEST(SendRecv, AForgottenRecvIsAMismatch) {
  std::vector<std::string> messages(3);
  std::vector<ErrorCode> codes(3, ErrorCode::kOk);
  auto errors = runRanks(
      3,
      [&](Communicator& c) {
        std::vector<float> v(64, 1.0f);
        try {
          if (c.rank() == 0) c.send(std::span<const float>(v), 1).wait();
          c.allReduce(std::span<float>(v)).wait();
          // A rank whose own messages of the all-reduce all matched may finish it (with every
          // contribution in place); it learns of the mismatch in its next call.
          c.barrier().wait();
        } catch (const Error& e) {
          codes[static_cast<size_t>(c.rank())] = e.code();
          messages[static_cast<size_t>(c.rank())] = e.what();
        }
      },
      testOptions(std::chrono::seconds(5)));
  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_EQ(codes[1], ErrorCode::kMismatch) << messages[1];
  EXPECT_NE(messages[1].find("send_recv before #0"), std::string::npos) << messages[1];
  EXPECT_NE(codes[0], ErrorCode::kOk);
  EXPECT_NE(codes[2], ErrorCode::kOk);
}

TEST(SendRecv, BadPeersAreRefusedBeforeAnythingIsSent) {
  expectRanks(2, [](Communicator& c) {
    float x = 1;
    for (int peer : {c.rank(), -1, 2}) {
      EXPECT_THROW(c.send(std::span<const float>(&x, 1), peer), Error) << peer;
      EXPECT_THROW(c.recv(std::span<float>(&x, 1), peer), Error) << peer;
    }
    EXPECT_THROW(c.send(nullptr, 3, DataType::kF32, 1 - c.rank()), Error);
    c.allReduce(std::span<float>(&x, 1)).wait();
    EXPECT_EQ(x, 2.0f);
  });
}

TEST(SendRecv, CApi) {
  setenv("CHORUS_TIMEOUT", "20", 1);
  TcpStoreServer server("127.0.0.1", 0);
  const std::string url = "tcp://127.0.0.1:" + std::to_string(server.port());
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      std::string& err = errors[static_cast<size_t>(r)];
      chorus_comm* comm = nullptr;
      if (chorus_comm_init(url.c_str(), r, 3, &comm) != CHORUS_OK) {
        err = chorus_last_error(nullptr);
        return;
      }
      int32_t v[4] = {r, r, r, r};
      chorus_request* req = nullptr;
      // 0 -> 2 blocking, 2 -> 0 non-blocking; rank 1 only joins the barrier.
      if (r == 0) {
        if (chorus_send(comm, v, 4, CHORUS_DTYPE_I32, 2) != CHORUS_OK ||
            chorus_irecv(comm, v, 4, CHORUS_DTYPE_I32, 2, &req) != CHORUS_OK ||
            chorus_request_wait(req) != CHORUS_OK || v[3] != 2) {
          err = std::string("rank 0: ") + chorus_last_error(comm);
        }
      } else if (r == 2) {
        int32_t got[4] = {};
        if (chorus_recv(comm, got, 4, CHORUS_DTYPE_I32, 0) != CHORUS_OK || got[0] != 0 ||
            chorus_isend(comm, v, 4, CHORUS_DTYPE_I32, 0, &req) != CHORUS_OK ||
            chorus_request_wait(req) != CHORUS_OK) {
          err = std::string("rank 2: ") + chorus_last_error(comm);
        }
      }
      if (chorus_send(comm, v, 4, CHORUS_DTYPE_I32, r) != CHORUS_ERR_INVALID_ARGUMENT) {
        err += " send to self accepted";
      }
      if (chorus_barrier(comm) != CHORUS_OK)
        err += std::string(" barrier: ") + chorus_last_error(comm);
      chorus_comm_destroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

}  // namespace
}  // namespace chorus::testing
