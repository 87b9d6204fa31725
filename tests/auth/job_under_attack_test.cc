// A running job with a key: while rank 0 waits for rank 1 at its listener (the transport's
// rendezvous, driven directly so that the test controls when rank 1 comes), strangers try its
// port and the store: no key, a wrong key, a replayed handshake, random bytes, silence and a
// byte at a time. Each is turned away and logged; rank 1 still gets in and the data exchanged is
// right. A rank whose own key is wrong fails saying so.
#include "auth/client_handshake.h"
#include "auth/refusal_log.h"
#include "auth_test_util.h"
#include "transport/connect.h"
#include "unit/scoped_env.h"

#include <chorus/chorus.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <thread>

namespace chorus {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

Options jobOptions() {
  Options o;
  o.timeout = 30s;
  o.transport = TransportKind::kTcp;
  o.auth = AuthOptions::fromEnv();  // the job's key, from CHORUS_AUTH_KEY_FILE
  return o;
}

OpDesc exchangeOp() {
  OpDesc d = OpDesc::of(CollectiveKind::kAllReduce, 1000, DataType::kI32, ReduceOp::kSum);
  d.seq = 0;
  return d;
}

// Rank `rank` of 2 over its transport: sends (rank + 1) * i to the other and checks what comes
// back; returns "" when it is right.
std::string exchange(transport::Transport& tx, int rank) {
  const int peer = 1 - rank;
  std::vector<int> out(1000), in(1000, -1);
  for (int i = 0; i < 1000; ++i) out[static_cast<size_t>(i)] = (rank + 1) * i;
  tx.beginOp(exchangeOp());
  transport::Request send, recv;
  tx.postRecv(recv, peer, in.data(), in.size() * sizeof(int), 0);
  tx.postSend(send, peer, out.data(), out.size() * sizeof(int), 0);
  tx.wait(recv, Deadline::after(20s));
  tx.wait(send, Deadline::after(20s));
  for (int i = 0; i < 1000; ++i) {
    if (in[static_cast<size_t>(i)] != (peer + 1) * i) {
      return "rank " + std::to_string(rank) + ": element " + std::to_string(i) + " is " +
             std::to_string(in[static_cast<size_t>(i)]);
    }
  }
  return "";
}

// Connects rank `rank` of 2 through the store and exchanges data.
std::string runRank(int port, int rank) {
  try {
    auto store = makeTcpStore("127.0.0.1", port, 30s);
    auto tx = transport::connect(*store, rank, 2, jobOptions(), "127.0.0.1");
    std::string result = exchange(*tx, rank);
    tx->close();
    return result;
  } catch (const std::exception& e) {
    return "rank " + std::to_string(rank) + ": " + e.what();
  }
}

TEST(JobUnderAttack, StrangersAtTheListenerAndTheStoreAreRefusedAndTheJobIsRight) {
  auth::forgetRefusals();
  test::ScratchDir dir;
  const std::string keyPath = authtest::writeKey(dir, "job.key");
  ScopedEnv env;
  env.set("CHORUS_AUTH", nullptr);
  env.set("CHORUS_AUTH_KEY_FILE", keyPath.c_str());
  env.set("CHORUS_HANDSHAKE_TIMEOUT", "1");
  TcpStoreServer server("127.0.0.1", 0);
  ::testing::internal::CaptureStderr();

  auto rank0 = std::async(std::launch::async, [&] { return runRank(server.port(), 0); });
  auto store = makeTcpStore("127.0.0.1", server.port(), 10s);
  const auto record = store->get("addr/0", 10s);
  const std::string address(record.begin(), std::find(record.begin(), record.end(), ' '));
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  const auto jobBytes = store->get("job", 10s);
  std::vector<uint8_t> context(4 + jobBytes.size());
  std::memcpy(context.data(), "rank", 4);
  std::copy(jobBytes.begin(), jobBytes.end(), context.begin() + 4);
  const auth::JobKey key = auth::loadKeyFile(keyPath);

  // No key: a bare hello (tcp/hello.h) gets no answer but a closed connection.
  std::vector<uint8_t> hello(72, 0);
  hello[0] = 'C', hello[1] = 'H', hello[2] = 'R', hello[3] = 'H', hello[4] = 1, hello[5] = 1;
  int noKey = authtest::connectRaw(port);
  authtest::sendBytes(noKey, hello);
  EXPECT_TRUE(authtest::closedWithin(noKey, 5s)) << "no key";
  ::close(noKey);

  // A wrong key.
  int wrong = authtest::connectRaw(port);
  auto result = auth::authenticateToServer(wrong, auth::JobKey::random(), context,
                                           Deadline::after(std::chrono::seconds(5)));
  EXPECT_EQ(result.outcome, auth::ClientOutcome::kRefused) << result.why;
  ::close(wrong);

  // A recorded handshake (here recorded by a holder of the key who then says nothing more),
  // replayed on a new connection.
  int recorder = authtest::connectRaw(port);
  bool accepted = false;
  auto recorded = authtest::recordHandshake(recorder, key, context, &accepted);
  EXPECT_TRUE(accepted);
  ::close(recorder);
  int replay = authtest::connectRaw(port);
  authtest::sendBytes(replay, recorded);
  authtest::sendBytes(replay, hello);
  EXPECT_TRUE(authtest::closedWithin(replay, 5s)) << "replay";
  ::close(replay);

  // Random bytes, to the listener and to the store.
  for (int target : {port, server.port()}) {
    int junk = authtest::connectRaw(target);
    authtest::sendBytes(junk, authtest::randomBytes(500, static_cast<unsigned>(target)));
    EXPECT_TRUE(authtest::closedWithin(junk, 5s)) << "random bytes to port " << target;
    ::close(junk);
  }

  // Silence and a byte at a time: dropped at the handshake deadline (1 s).
  int silent = authtest::connectRaw(port);
  int slow = authtest::connectRaw(port);
  bool slowClosed = false;
  for (int i = 0; i < 40 && !slowClosed; ++i) {
    authtest::sendBytes(slow, {'C'});
    slowClosed = authtest::closedWithin(slow, 200ms);
  }
  EXPECT_TRUE(slowClosed) << "a byte every 200 ms for 8 s was never dropped";
  EXPECT_TRUE(authtest::closedWithin(silent, 5s)) << "silence";
  ::close(silent);
  ::close(slow);

  // The real rank 1 still gets in, and the sums are right.
  auto rank1 = std::async(std::launch::async, [&] { return runRank(server.port(), 1); });
  EXPECT_EQ(rank0.get(), "");
  EXPECT_EQ(rank1.get(), "");
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("chorus: authentication failed from 127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr(": wrong key"));
  EXPECT_THAT(log, HasSubstr(": handshake timed out"));
}

TEST(JobUnderAttack, ARankWithAWrongKeyFailsSayingSo) {
  test::ScratchDir dir;
  const std::string keyPath = authtest::writeKey(dir, "job.key");
  const std::string otherPath = authtest::writeKey(dir, "other.key");
  ScopedEnv env;
  env.set("CHORUS_AUTH", nullptr);
  env.set("CHORUS_AUTH_KEY_FILE", keyPath.c_str());
  TcpStoreServer server("127.0.0.1", 0);
  env.set("CHORUS_AUTH_KEY_FILE", otherPath.c_str());
  try {
    Communicator::create("tcp://127.0.0.1:" + std::to_string(server.port()), 1, 2, jobOptions());
    ADD_FAILURE() << "a rank with the wrong key joined";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("wrong key"));
    EXPECT_THAT(e.what(), HasSubstr(otherPath));
  }
}

TEST(JobUnderAttack, RequiredModeRefusesToRunWithoutAKey) {
  ScopedEnv env;
  env.set("CHORUS_AUTH", "required");
  env.set("CHORUS_AUTH_KEY_FILE", nullptr);
  try {
    TcpStoreServer server("127.0.0.1", 0);
    ADD_FAILURE() << "a store server started without a key";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("CHORUS_AUTH=required"));
  }
}

}  // namespace
}  // namespace chorus
