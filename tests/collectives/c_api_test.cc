// The C API beyond the collectives themselves: version, options, requests (free, ibarrier),
// abort and the asynchronous error, and the names kept from earlier versions. Ranks are threads
// of this process, each with its own chorus_comm over one TCP store.
#include <chorus/chorus.h>
#include <chorus/chorus.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

chorus_options testOptions(long long timeoutMs = 20000) {
  chorus_options o{};
  o.struct_size = sizeof(o);
  o.timeout_ms = timeoutMs;
  return o;
}

// Runs body(comm, rank) on n threads, each with a communicator made by
// chorus_comm_init_with_options.
void runRanks(int n, const std::function<void(chorus_comm*, int)>& body,
              chorus_options options = testOptions()) {
  chorus::TcpStoreServer server("127.0.0.1", 0);
  const std::string url = "tcp://127.0.0.1:" + std::to_string(server.port());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      chorus_comm* comm = nullptr;
      chorus_status s = chorus_comm_init_with_options(url.c_str(), r, n, &options, &comm);
      ASSERT_EQ(s, CHORUS_OK) << "rank " << r << ": " << chorus_last_error(nullptr);
      body(comm, r);
      EXPECT_EQ(chorus_comm_destroy(comm), CHORUS_OK);
    });
  }
  for (auto& t : threads) t.join();
}

// Sum over ranks of the input rank r contributes at index i.
int32_t input(int r, size_t i) { return (r + 1) * 1000 + static_cast<int32_t>(i % 97); }
int32_t expectedSum(int n, size_t i) {
  int32_t s = 0;
  for (int r = 0; r < n; ++r) s += input(r, i);
  return s;
}

std::vector<int32_t> inputs(int r, size_t count) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = input(r, i);
  return v;
}

void expectSums(const std::vector<int32_t>& v, int n, const std::string& what) {
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(v[i], expectedSum(n, i)) << what << " at " << i << " of " << v.size();
  }
}

// Polls until pred() holds; false after `limit`.
bool eventually(const std::function<bool()>& pred, milliseconds limit = milliseconds(10000)) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return pred();
}

// ---- version ----

TEST(CApiVersion, MacrosMatchTheProjectAndTheLibrary) {
  const std::string macros = std::to_string(CHORUS_VERSION_MAJOR) + "." +
                             std::to_string(CHORUS_VERSION_MINOR) + "." +
                             std::to_string(CHORUS_VERSION_PATCH);
  EXPECT_EQ(macros, CHORUS_PROJECT_VERSION);  // project(... VERSION) in CMakeLists.txt
  int major = -1, minor = -1, patch = -1;
  chorus_get_version(&major, &minor, &patch);
  EXPECT_EQ(major, CHORUS_VERSION_MAJOR);
  EXPECT_EQ(minor, CHORUS_VERSION_MINOR);
  EXPECT_EQ(patch, CHORUS_VERSION_PATCH);
  chorus_get_version(nullptr, &minor, nullptr);  // parts may be skipped
  EXPECT_EQ(minor, CHORUS_VERSION_MINOR);
}

// ---- options ----

TEST(CApiOptions, FieldsReachTheCommunicator) {
  chorus_options o = testOptions(1234);
  o.algorithm = "ring";
  o.transport = CHORUS_TRANSPORT_TCP;
  o.debug = CHORUS_DEBUG_OFF;
  o.segment_bytes = 4096;
  o.host_id = "host-a";
  runRanks(
      2,
      [](chorus_comm* comm, int r) {
        const chorus::Options& got = chorus::communicatorOf(comm).options();
        EXPECT_EQ(got.timeout, milliseconds(1234));
        EXPECT_EQ(chorus::toString(got.algorithm), "ring");
        EXPECT_EQ(got.transport, chorus::TransportKind::kTcp);
        EXPECT_EQ(got.debug, chorus::DebugLevel::kOff);
        EXPECT_EQ(got.segmentBytes, 4096u);
        EXPECT_EQ(got.hostId, "host-a");
        EXPECT_EQ(chorus::communicatorOf(comm).transportTo(1 - r), "tcp");
        std::vector<int32_t> v = inputs(r, 1000);
        ASSERT_EQ(
            chorus_all_reduce(comm, v.data(), v.data(), v.size(), CHORUS_DTYPE_I32, CHORUS_OP_SUM),
            CHORUS_OK)
            << chorus_last_error(comm);
        expectSums(v, 2, "all_reduce");
        EXPECT_EQ(chorus::communicatorOf(comm).lastAlgorithm(), "ring");
      },
      o);
}

TEST(CApiOptions, TooSmallStructSizeIsRefused) {
  chorus_options o = testOptions(777);
  // Every version has at least the fields up to shm_ring_bytes: a size that ends before them is
  // a caller that did not set struct_size.
  o.struct_size = offsetof(chorus_options, debug);
  chorus_comm* comm = reinterpret_cast<chorus_comm*>(0x1);
  EXPECT_EQ(chorus_comm_init_with_options("file:///nonexistent", 0, 1, &o, &comm),
            CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(chorus_last_error(nullptr)).find("struct_size"), std::string::npos);
}

// A caller built against a later header passes a larger struct; the fields this library knows
// are read, the rest ignored.
TEST(CApiOptions, LargerStructOfALaterVersionIsAccepted) {
  struct Later {
    chorus_options known;
    long long futureField;
  } later{};
  later.known = testOptions(4321);
  later.known.struct_size = sizeof(Later);
  later.futureField = 12345;
  chorus::TcpStoreServer server("127.0.0.1", 0);
  const std::string url = "tcp://127.0.0.1:" + std::to_string(server.port());
  chorus_comm* comm = nullptr;
  ASSERT_EQ(chorus_comm_init_with_options(url.c_str(), 0, 1, &later.known, &comm), CHORUS_OK)
      << chorus_last_error(nullptr);
  EXPECT_EQ(chorus::communicatorOf(comm).options().timeout, milliseconds(4321));
  int32_t x = 5;
  EXPECT_EQ(chorus_all_reduce(comm, &x, &x, 1, CHORUS_DTYPE_I32, CHORUS_OP_SUM), CHORUS_OK);
  EXPECT_EQ(x, 5);
  chorus_comm_destroy(comm);
}

TEST(CApiOptions, BadValuesAreRefusedBeforeConnecting) {
  auto refused = [](chorus_options o, const char* field) {
    chorus_comm* comm = nullptr;
    // World size 2 with nobody else: a value checked late would hang until the timeout.
    const auto t0 = Clock::now();
    EXPECT_EQ(chorus_comm_init_with_options("tcp://127.0.0.1:1", 0, 2, &o, &comm),
              CHORUS_ERR_INVALID_ARGUMENT)
        << field;
    EXPECT_EQ(comm, nullptr);
    EXPECT_NE(std::string(chorus_last_error(nullptr)).find(field), std::string::npos)
        << chorus_last_error(nullptr);
    EXPECT_LT(secondsSince(t0), 2.0) << field;
  };
  chorus_options o = testOptions();
  o.struct_size = 0;
  refused(o, "struct_size");
  o = testOptions(-5);
  refused(o, "timeout_ms");
  o = testOptions();
  int bad = 99;
  std::memcpy(&o.transport, &bad, sizeof(bad));
  refused(o, "transport");
  o = testOptions();
  std::memcpy(&o.debug, &bad, sizeof(bad));
  refused(o, "debug");
  o = testOptions();
  o.segment_bytes = 3;
  refused(o, "segment_bytes");
  o = testOptions();
  o.segment_bytes = (size_t{1} << 30) + 1;  // CHORUS_SEGMENT_BYTES stops at 1 GiB too
  refused(o, "segment_bytes");
  o = testOptions();
  o.shm_ring_bytes = 100;
  refused(o, "shm_ring_bytes");
  o = testOptions();
  o.shm_ring_bytes = (size_t{1} << 30) + 4096;
  refused(o, "shm_ring_bytes");
  o = testOptions();
  o.socket_buffer_bytes = -7;
  refused(o, "socket_buffer_bytes");
  o = testOptions();
  o.algorithm = "no-such-algorithm";
  refused(o, "no-such-algorithm");

  EXPECT_EQ(chorus_comm_init_with_options("file:///x", 0, 1, nullptr, nullptr),
            CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(chorus_comm_init_with_options(nullptr, 0, 1, nullptr, nullptr),
            CHORUS_ERR_INVALID_ARGUMENT);
}

// CHORUS_SOCKET_BUFFER=0 keeps the kernel's buffer sizes; in chorus_options zero means "not set",
// so the kernel's default has a value of its own.
TEST(CApiOptions, SocketBufferCanAskForTheKernelDefault) {
  chorus_options o = testOptions();
  o.socket_buffer_bytes = CHORUS_SOCKET_BUFFER_KERNEL_DEFAULT;
  chorus::TcpStoreServer server("127.0.0.1", 0);
  const std::string url = "tcp://127.0.0.1:" + std::to_string(server.port());
  chorus_comm* comm = nullptr;
  ASSERT_EQ(chorus_comm_init_with_options(url.c_str(), 0, 1, &o, &comm), CHORUS_OK)
      << chorus_last_error(nullptr);
  EXPECT_EQ(chorus::communicatorOf(comm).options().socketBufferBytes, 0);
  chorus_comm_destroy(comm);
  o.socket_buffer_bytes = 0;  // not set: the default (or CHORUS_SOCKET_BUFFER)
  ASSERT_EQ(chorus_comm_init_with_options(url.c_str(), 0, 1, &o, &comm), CHORUS_OK);
  EXPECT_EQ(chorus::communicatorOf(comm).options().socketBufferBytes,
            chorus::Options::fromEnv().socketBufferBytes);
  chorus_comm_destroy(comm);
}

// ---- requests ----

TEST(CApiRequests, FreeAfterTestAndWhilePending) {
  for (int n : {1, 2, 3, 5}) {
    SCOPED_TRACE("world size " + std::to_string(n));
    runRanks(n, [n](chorus_comm* comm, int r) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1009}}) {
        // Completed through chorus_request_test, then freed without waiting.
        std::vector<int32_t> v = inputs(r, count);
        chorus_request* req = nullptr;
        ASSERT_EQ(chorus_iall_reduce(comm, v.data(), v.data(), count, CHORUS_DTYPE_I32,
                                     CHORUS_OP_SUM, &req),
                  CHORUS_OK)
            << chorus_last_error(comm);
        int done = 0;
        ASSERT_TRUE(eventually([&] {
          EXPECT_EQ(chorus_request_test(req, &done), CHORUS_OK);
          return done == 1;
        }));
        EXPECT_EQ(chorus_request_free(req), CHORUS_OK);
        expectSums(v, n, "after chorus_request_test");

        // Freed while (probably) pending: it completes in the background, before any later call.
        std::vector<int32_t> w = inputs(r, count);
        ASSERT_EQ(chorus_iall_reduce(comm, w.data(), w.data(), count, CHORUS_DTYPE_I32,
                                     CHORUS_OP_SUM, &req),
                  CHORUS_OK);
        EXPECT_EQ(chorus_request_free(req), CHORUS_OK);
        ASSERT_EQ(chorus_barrier(comm), CHORUS_OK) << chorus_last_error(comm);
        expectSums(w, n, "freed while pending");
      }
    });
  }
  EXPECT_EQ(chorus_request_free(nullptr), CHORUS_OK);
}

TEST(CApiRequests, FreeReportsTheFailureOfACompletedRequest) {
  runRanks(1, [](chorus_comm* comm, int) {
    ASSERT_EQ(chorus_comm_abort(comm), CHORUS_OK);
    chorus_request* req = nullptr;
    ASSERT_EQ(chorus_ibarrier(comm, &req), CHORUS_OK);
    int done = 0;
    ASSERT_EQ(chorus_request_test(req, &done), CHORUS_OK);
    EXPECT_EQ(done, 1);
    EXPECT_EQ(chorus_request_free(req), CHORUS_ERR_ABORTED);
    EXPECT_NE(std::string(chorus_last_error(comm)).find("aborted"), std::string::npos);
  });
}

TEST(CApiRequests, NonBlockingBarrierWaitsForEveryRank) {
  for (int n : {1, 2, 3, 5, 8}) {
    SCOPED_TRACE("world size " + std::to_string(n));
    std::atomic<int> arrived{0};
    runRanks(n, [&](chorus_comm* comm, int r) {
      // Late ranks: a barrier that let anyone through early would see arrived < n.
      std::this_thread::sleep_for(milliseconds(20 * r));
      arrived.fetch_add(1);
      chorus_request* req = nullptr;
      ASSERT_EQ(chorus_ibarrier(comm, &req), CHORUS_OK) << chorus_last_error(comm);
      ASSERT_EQ(chorus_request_wait(req), CHORUS_OK) << chorus_last_error(comm);
      EXPECT_EQ(arrived.load(), n);
    });
  }
}

TEST(CApiRequests, NullArgumentsAreRefused) {
  runRanks(1, [](chorus_comm* comm, int) {
    EXPECT_EQ(chorus_ibarrier(comm, nullptr), CHORUS_ERR_INVALID_ARGUMENT);
    chorus_request* req = reinterpret_cast<chorus_request*>(0x1);
    EXPECT_EQ(chorus_ibarrier(nullptr, &req), CHORUS_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(req, nullptr);
    EXPECT_EQ(chorus_comm_abort(nullptr), CHORUS_ERR_INVALID_ARGUMENT);
    chorus_status st = CHORUS_OK;
    EXPECT_EQ(chorus_comm_get_async_error(nullptr, &st), CHORUS_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(chorus_comm_get_async_error(comm, nullptr), CHORUS_ERR_INVALID_ARGUMENT);
  });
}

// ---- abort and the asynchronous error ----

// Rank 0 is inside a blocking all-reduce that rank 1 never joins; another thread aborts it.
TEST(CApiAbort, FromAnotherThreadFailsThisRankAndTellsThePeer) {
  runRanks(2, [](chorus_comm* comm, int r) {
    std::vector<int32_t> v = inputs(r, 100);
    if (r == 0) {
      std::thread aborter([comm] {
        std::this_thread::sleep_for(milliseconds(200));
        EXPECT_EQ(chorus_comm_abort(comm), CHORUS_OK);
      });
      const auto t0 = Clock::now();
      EXPECT_EQ(
          chorus_all_reduce(comm, v.data(), v.data(), v.size(), CHORUS_DTYPE_I32, CHORUS_OP_SUM),
          CHORUS_ERR_ABORTED)
          << chorus_last_error(comm);
      EXPECT_LT(secondsSince(t0), 3.0);
      aborter.join();
      // Later calls fail at once, blocking or not.
      EXPECT_EQ(chorus_barrier(comm), CHORUS_ERR_ABORTED);
      chorus_request* req = nullptr;
      ASSERT_EQ(chorus_ibarrier(comm, &req), CHORUS_OK);
      EXPECT_EQ(chorus_request_wait(req), CHORUS_ERR_ABORTED);
      chorus_status st = CHORUS_OK;
      EXPECT_EQ(chorus_comm_get_async_error(comm, &st), CHORUS_OK);
      EXPECT_EQ(st, CHORUS_ERR_ABORTED);
    } else {
      std::this_thread::sleep_for(milliseconds(600));
      const auto t0 = Clock::now();
      const chorus_status s =
          chorus_all_reduce(comm, v.data(), v.data(), v.size(), CHORUS_DTYPE_I32, CHORUS_OP_SUM);
      EXPECT_NE(s, CHORUS_OK);
      EXPECT_NE(s, CHORUS_ERR_TIMEOUT) << "the peer's abort should arrive before the timeout";
      EXPECT_NE(std::string(chorus_last_error(comm)).find("rank 0"), std::string::npos)
          << chorus_last_error(comm);
      EXPECT_LT(secondsSince(t0), 5.0);
    }
  });
}

// A second thread reads the asynchronous error and the last error's message while the calling
// thread's call fails and writes its own: every string read is whole (the failure's message or
// ""), and ThreadSanitizer sees no race on the message (make test-tsan).
TEST(CApiAbort, LastErrorIsReadableFromAnotherThreadWhileACallFails) {
  runRanks(2, [](chorus_comm* comm, int r) {
    std::vector<int32_t> v = inputs(r, 100);
    if (r == 1) {
      std::this_thread::sleep_for(milliseconds(400));
      chorus_barrier(comm);  // fails: rank 0 aborted
      return;
    }
    std::atomic<bool> callDone{false};
    std::thread watcher([&] {
      std::this_thread::sleep_for(milliseconds(100));
      EXPECT_EQ(chorus_comm_abort(comm), CHORUS_OK);
      int reads = 0;
      while (!callDone.load() || reads < 100) {
        chorus_status st = CHORUS_OK;
        EXPECT_EQ(chorus_comm_get_async_error(comm, &st), CHORUS_OK);
        const std::string why = chorus_last_error(comm);
        if (st != CHORUS_OK) {
          EXPECT_NE(why.find("abort"), std::string::npos) << why;
        }
        ++reads;
      }
    });
    EXPECT_EQ(
        chorus_all_reduce(comm, v.data(), v.data(), v.size(), CHORUS_DTYPE_I32, CHORUS_OP_SUM),
        CHORUS_ERR_ABORTED);
    const std::string mine = chorus_last_error(comm);
    callDone = true;
    watcher.join();
    EXPECT_NE(mine.find("abort"), std::string::npos) << mine;
  });
}

// Ranks 0..n-2 start an all-reduce and do not wait on it; rank n-1 aborts instead of joining.
// The others learn of it through chorus_comm_get_async_error alone.
TEST(CApiAbort, PeerAbortShowsAsAsyncErrorWithoutWaiting) {
  for (int n : {2, 3, 5}) {
    SCOPED_TRACE("world size " + std::to_string(n));
    runRanks(n, [n](chorus_comm* comm, int r) {
      chorus_status st = CHORUS_ERR_INTERNAL;
      ASSERT_EQ(chorus_comm_get_async_error(comm, &st), CHORUS_OK);
      EXPECT_EQ(st, CHORUS_OK);  // nothing failed yet
      if (r == n - 1) {
        ASSERT_EQ(chorus_comm_abort(comm), CHORUS_OK);
        EXPECT_TRUE(eventually([&] {
          chorus_comm_get_async_error(comm, &st);
          return st != CHORUS_OK;
        }));
        EXPECT_EQ(st, CHORUS_ERR_ABORTED);
        return;
      }
      std::vector<int32_t> v = inputs(r, 257);
      chorus_request* req = nullptr;
      ASSERT_EQ(chorus_iall_reduce(comm, v.data(), v.data(), v.size(), CHORUS_DTYPE_I32,
                                   CHORUS_OP_SUM, &req),
                CHORUS_OK);
      EXPECT_TRUE(eventually([&] {
        EXPECT_EQ(chorus_comm_get_async_error(comm, &st), CHORUS_OK);
        return st != CHORUS_OK;
      }));
      EXPECT_NE(st, CHORUS_ERR_TIMEOUT);
      const std::string why = chorus_last_error(comm);
      EXPECT_NE(why.find("rank " + std::to_string(n - 1)), std::string::npos) << why;
      EXPECT_NE(chorus_request_free(req), CHORUS_OK);  // completed, with the failure
    });
  }
}

// ---- names kept from earlier versions ----

// struct_size of chorus_collective_options: too small is refused; 0.2's fields reach the call.
TEST(CApiNames, CollectiveOptionsNeedStructSize) {
  runRanks(2, [](chorus_comm* comm, int r) {
    std::vector<float> v(64, static_cast<float>(r + 1));
    chorus_collective_options unset{};
    EXPECT_EQ(chorus_all_reduce_with_options(comm, v.data(), v.data(), v.size(), CHORUS_DTYPE_F32,
                                             CHORUS_OP_SUM, &unset),
              CHORUS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(chorus_last_error(comm)).find("struct_size"), std::string::npos)
        << chorus_last_error(comm);
  });
}

// The fields chorus_options gained in 0.2 reach the communicator's Options; their sentinels
// mean what the variables' zeros mean.
TEST(CApiOptions, LaterFieldsReachTheCommunicator) {
  chorus::TcpStoreServer server("127.0.0.1", 0);
  const std::string url = "tcp://127.0.0.1:" + std::to_string(server.port());
  auto check = [&](chorus_options o, size_t tcpSegment, int spin, size_t singleCopy) {
    chorus_comm* comm = nullptr;
    ASSERT_EQ(chorus_comm_init_with_options(url.c_str(), 0, 1, &o, &comm), CHORUS_OK)
        << chorus_last_error(nullptr);
    const chorus::Options& got = chorus::communicatorOf(comm).options();
    EXPECT_EQ(got.tcpSegmentBytes, tcpSegment);
    EXPECT_EQ(got.spinMicros, spin);
    EXPECT_EQ(got.shmSingleCopyBytes, singleCopy);
    chorus_comm_destroy(comm);
  };
  chorus_options o = testOptions(3000);
  o.tcp_segment_bytes = 65536;
  o.spin_us = 50;
  o.shm_single_copy_bytes = 1 << 20;
  check(o, 65536, 50, size_t{1} << 20);
  o.tcp_segment_bytes = CHORUS_TCP_SEGMENT_AS_SEGMENT;
  o.spin_us = CHORUS_SPIN_NONE;
  o.shm_single_copy_bytes = CHORUS_SHM_SINGLE_COPY_NEVER;
  check(o, 0, 0, 0);
  o = testOptions(3000);
  o.spin_us = -7;
  chorus_comm* comm = reinterpret_cast<chorus_comm*>(0x1);
  EXPECT_EQ(chorus_comm_init_with_options(url.c_str(), 0, 1, &o, &comm),
            CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(chorus_last_error(nullptr)).find("spin_us -7"), std::string::npos)
      << chorus_last_error(nullptr);
  o = testOptions(3000);
  o.tcp_segment_bytes = 10;
  EXPECT_EQ(chorus_comm_init_with_options(url.c_str(), 0, 1, &o, &comm),
            CHORUS_ERR_INVALID_ARGUMENT);
}

// The fields added in 0.3 (the recorder, authentication, the TCP links) reach the communicator's
// Options, sentinels as the variables' zeros; bad values are refused naming the field.
TEST(CApiOptions, TraceAuthAndTcpFieldsReachTheCommunicator) {
  chorus::TcpStoreServer server("127.0.0.1", 0, chorus::AuthOptions{}, chorus::StoreLimits{});
  const std::string url = "tcp://127.0.0.1:" + std::to_string(server.port());
  chorus_options o = testOptions(3000);
  o.trace_entries = 64;
  o.trace_dir = "/nonexistent/trace";
  o.progress_seconds = 2.5;
  o.heartbeat_seconds = 7.5;
  o.auth = CHORUS_AUTH_OFF;
  o.handshake_timeout_ms = 4000;
  o.tcp_zerocopy_bytes = 1 << 20;
  o.trace_signal = CHORUS_TRACE_SIGNAL_USR2;
  o.report = 1;
  o.trace_detail_us = CHORUS_TRACE_DETAIL_EVERY;
  o.tcp_zerocopy_keep = 1;
  o.store_max_key = 100;
  o.store_max_value = CHORUS_STORE_MAX_VALUE_ZERO;
  o.store_max_connections = 9;
  o.store_frame_timeout_ms = 5000;
  chorus_comm* comm = nullptr;
  ASSERT_EQ(chorus_comm_init_with_options(url.c_str(), 0, 1, &o, &comm), CHORUS_OK)
      << chorus_last_error(nullptr);
  const chorus::Options& got = chorus::communicatorOf(comm).options();
  EXPECT_EQ(got.trace.entries, 64u);
  EXPECT_EQ(got.trace.dir, "/nonexistent/trace");
  EXPECT_EQ(got.trace.progressSeconds, 2.5);
  EXPECT_EQ(got.trace.heartbeatSeconds, 7.5);
  EXPECT_EQ(got.auth.mode, chorus::AuthMode::kOff);
  EXPECT_EQ(got.auth.handshakeTimeout, std::chrono::milliseconds(4000));
  EXPECT_EQ(got.tcp.zeroCopyBytes, size_t{1} << 20);
  EXPECT_EQ(got.trace.signal, SIGUSR2);
  EXPECT_TRUE(got.trace.report);
  EXPECT_EQ(got.trace.detailMicros, 0.0);
  EXPECT_TRUE(got.tcp.zeroCopyKeep);
  EXPECT_EQ(got.storeLimits.maxKeyBytes, 100u);
  EXPECT_EQ(got.storeLimits.maxValueBytes, 0u);
  EXPECT_EQ(got.storeLimits.maxConnections, 9u);
  EXPECT_EQ(got.storeLimits.frameTimeout, std::chrono::milliseconds(5000));
  chorus_comm_destroy(comm);

  o = testOptions(3000);
  o.trace_entries = CHORUS_TRACE_OFF;
  o.progress_seconds = CHORUS_PROGRESS_NEVER;
  o.heartbeat_seconds = CHORUS_HEARTBEAT_OFF;
  ASSERT_EQ(chorus_comm_init_with_options(url.c_str(), 0, 1, &o, &comm), CHORUS_OK)
      << chorus_last_error(nullptr);
  EXPECT_EQ(chorus::communicatorOf(comm).options().trace.entries, 0u);
  EXPECT_EQ(chorus::communicatorOf(comm).options().trace.progressSeconds, 0.0);
  EXPECT_EQ(chorus::communicatorOf(comm).options().trace.heartbeatSeconds, 0.0);
  // The recorder is off: a dump is refused.
  EXPECT_EQ(chorus_comm_dump_trace(comm, "/tmp"), CHORUS_ERR_INVALID_ARGUMENT);
  chorus_comm_destroy(comm);

  // Authentication required without a key: refused before anything connects.
  o = testOptions(3000);
  o.auth = CHORUS_AUTH_REQUIRED;
  EXPECT_EQ(chorus_comm_init_with_options(url.c_str(), 0, 1, &o, &comm),
            CHORUS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(chorus_last_error(nullptr)).find("CHORUS_AUTH=required"), std::string::npos)
      << chorus_last_error(nullptr);

  auto refused = [&](chorus_options bad, const char* field) {
    EXPECT_EQ(chorus_comm_init_with_options(url.c_str(), 0, 1, &bad, &comm),
              CHORUS_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(chorus_last_error(nullptr)).find(field), std::string::npos)
        << chorus_last_error(nullptr);
  };
  chorus_options bad = testOptions(3000);
  bad.trace_entries = -5;
  refused(bad, "trace_entries -5");
  bad = testOptions(3000);
  bad.auth = static_cast<chorus_auth_mode>(9);
  refused(bad, "auth 9");
  bad = testOptions(3000);
  bad.encrypt = 2;
  refused(bad, "encrypt 2");
  bad = testOptions(3000);
  bad.progress_seconds = -3;
  refused(bad, "progress_seconds");
  bad = testOptions(3000);
  bad.heartbeat_seconds = -2;
  refused(bad, "heartbeat_seconds");
  bad = testOptions(3000);
  bad.trace_signal = 7;
  refused(bad, "trace_signal 7");
  bad = testOptions(3000);
  bad.store_max_key = size_t{2} << 20;
  refused(bad, "store_max_key 2097152");
  bad = testOptions(3000);
  bad.store_frame_timeout_ms = 10;
  refused(bad, "store_frame_timeout_ms 10");
}

}  // namespace
