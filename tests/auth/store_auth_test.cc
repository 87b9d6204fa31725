// A TCP store server with a key: only clients that prove it get in. Clients without the key,
// with a wrong one, replaying a recorded handshake, sending random bytes or taking too long are
// refused (and logged once per address with the reason), and the store keeps serving its own.
// The limits on key and value sizes and connections answer with errors, never a crash.
#include "auth/refusal_log.h"
#include "auth_test_util.h"
#include "unit/scoped_env.h"

#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>

#include <thread>

namespace chorus {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
const std::vector<uint8_t> kStoreContext = {'s', 't', 'o', 'r', 'e'};

class StoreAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    auth::forgetRefusals();
    keyPath_ = authtest::writeKey(dir_, "job.key");
    wrongPath_ = authtest::writeKey(dir_, "other.key");
    env_.set("CHORUS_AUTH", nullptr);
    env_.set("CHORUS_AUTH_KEY_FILE", keyPath_.c_str());
    env_.set("CHORUS_HANDSHAKE_TIMEOUT", "1");
    env_.set("CHORUS_STORE_FRAME_TIMEOUT", "1");
    env_.set("CHORUS_STORE_MAX_KEY", "64");
    env_.set("CHORUS_STORE_MAX_VALUE", "1024");
    env_.set("CHORUS_STORE_MAX_CONNECTIONS", "16");
    server_ = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
    store_ = makeTcpStore("127.0.0.1", server_->port(), 5s);
    store_->set("before", {1, 2, 3});
  }

  // What a client with the given key file (nullptr: none) sees when it uses the store.
  std::string clientError(const char* keyFile) {
    env_.set("CHORUS_AUTH_KEY_FILE", keyFile);
    std::string what;
    try {
      auto s = makeTcpStore("127.0.0.1", server_->port(), 5s);
      s->set("intruder", {9});
    } catch (const Error& e) {
      what = e.what();
    }
    env_.set("CHORUS_AUTH_KEY_FILE", keyPath_.c_str());
    return what;
  }

  // Stops capturing stderr once the server has logged `lines` refusals (it may log after the
  // client has given up), or after 5 s.
  static std::string capturedLog(int lines) {
    for (int i = 0; i < 500 && auth::refusalsLogged() < lines; ++i)
      std::this_thread::sleep_for(10ms);
    return ::testing::internal::GetCapturedStderr();
  }

  // The job's own client still reads and writes correctly.
  void expectStoreServes() {
    EXPECT_EQ(store_->get("before", 1s), (Store::Bytes{1, 2, 3}));
    store_->set("after", {4});
    EXPECT_EQ(store_->get("after", 1s), Store::Bytes{4});
    EXPECT_FALSE(store_->check({"intruder"}));
  }

  test::ScratchDir dir_;
  ScopedEnv env_;
  std::string keyPath_, wrongPath_;
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<Store> store_;
};

TEST_F(StoreAuth, ClientWithoutKeyIsToldTheStoreRequiresOne) {
  ::testing::internal::CaptureStderr();
  std::string what = clientError(nullptr);
  std::string log = capturedLog(1);
  EXPECT_THAT(what, HasSubstr("requires authentication"));
  EXPECT_THAT(log, HasSubstr("chorus: authentication failed from 127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr("no key"));
  expectStoreServes();
}

TEST_F(StoreAuth, ClientWithWrongKeyFailsSayingSo) {
  ::testing::internal::CaptureStderr();
  std::string what = clientError(wrongPath_.c_str());
  std::string log = capturedLog(1);
  EXPECT_THAT(what, HasSubstr("authentication with server 127.0.0.1:"));
  EXPECT_THAT(what, HasSubstr("wrong key"));
  EXPECT_THAT(what, HasSubstr(wrongPath_));
  EXPECT_THAT(log, HasSubstr("authentication failed from 127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr(": wrong key"));
  expectStoreServes();
}

TEST_F(StoreAuth, ReplayedHandshakeIsRefused) {
  auth::JobKey key = auth::loadKeyFile(keyPath_);
  int first = authtest::connectRaw(server_->port());
  ASSERT_GE(first, 0);
  bool accepted = false;
  std::vector<uint8_t> recorded = authtest::recordHandshake(first, key, kStoreContext, &accepted);
  ASSERT_TRUE(accepted);
  ::close(first);
  int replay = authtest::connectRaw(server_->port());
  authtest::sendBytes(replay, recorded);
  // A SET behind the replayed handshake must never land.
  authtest::sendBytes(replay, {'C', 'H', 'S', 'T', 1,   0,   1,   0,   17,  0, 0, 0, 8, 0, 0,
                               0,   'i', 'n', 't', 'r', 'u', 'd', 'e', 'r', 1, 0, 0, 0, 9});
  EXPECT_TRUE(authtest::closedWithin(replay, 5s));
  ::close(replay);
  expectStoreServes();
}

TEST_F(StoreAuth, RandomBytesAreDropped) {
  for (unsigned seed = 1; seed <= 5; ++seed) {
    int fd = authtest::connectRaw(server_->port());
    authtest::sendBytes(fd, authtest::randomBytes(4096, seed));
    EXPECT_TRUE(authtest::closedWithin(fd, 5s)) << "seed " << seed;
    ::close(fd);
  }
  expectStoreServes();
}

TEST_F(StoreAuth, SilentAndTricklingClientsAreDroppedAtTheHandshakeDeadline) {
  int silent = authtest::connectRaw(server_->port());
  int trickle = authtest::connectRaw(server_->port());
  auth::JobKey key = auth::loadKeyFile(keyPath_);
  uint8_t challenge[auth::kChallengeBytes];
  auth::encodeMessage(auth::MessageKind::kChallenge, auth::freshNonce(), challenge);
  const auto start = authtest::Clock::now();
  bool trickleClosed = false;
  for (size_t i = 0; i < sizeof(challenge) && !trickleClosed; ++i) {
    authtest::sendBytes(trickle, {challenge[i]});
    trickleClosed = authtest::closedWithin(trickle, 200ms);
  }
  EXPECT_TRUE(trickleClosed || authtest::closedWithin(trickle, 5s));
  EXPECT_TRUE(authtest::closedWithin(silent, 5s));
  // CHORUS_HANDSHAKE_TIMEOUT=1: dropped after about a second, well before a loaded machine's 8.
  EXPECT_LT(authtest::Clock::now() - start, 8s);
  ::close(silent);
  ::close(trickle);
  expectStoreServes();
}

TEST_F(StoreAuth, LimitsAnswerWithErrorsThatNameThem) {
  try {
    store_->set(std::string(65, 'k'), {1});
    ADD_FAILURE() << "a 65-byte key was taken";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("CHORUS_STORE_MAX_KEY"));
  }
  try {
    store_->set("big", Store::Bytes(1025, 7));
    ADD_FAILURE() << "a 1025-byte value was taken";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("CHORUS_STORE_MAX_VALUE"));
  }
  try {
    store_->set("huge", Store::Bytes(100000, 7));  // beyond any request the store takes
    ADD_FAILURE() << "a 100000-byte request was taken";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::AnyOf(HasSubstr("CHORUS_STORE_MAX_VALUE"),
                                           HasSubstr("lost connection")));
  }
  store_->set(std::string(64, 'k'), Store::Bytes(1024, 7));
  expectStoreServes();
}

TEST_F(StoreAuth, ConnectionsBeyondTheLimitAreClosed) {
  std::vector<int> held;
  // The fixture's client holds one; fill up to the limit of 16 and one more.
  for (int i = 0; i < 16; ++i) held.push_back(authtest::connectRaw(server_->port()));
  // The one over the limit is closed at once, the others only at the handshake deadline (1 s).
  EXPECT_TRUE(authtest::closedWithin(held.back(), 500ms));
  EXPECT_FALSE(authtest::closedWithin(held.front(), 100ms));
  for (int fd : held) ::close(fd);
  std::this_thread::sleep_for(100ms);
  expectStoreServes();
}

TEST(StoreLimits, HalfAFrameIsDroppedAtTheFrameDeadlineWithoutAKey) {
  ScopedEnv env;
  env.set("CHORUS_AUTH_KEY_FILE", nullptr);
  env.set("CHORUS_STORE_FRAME_TIMEOUT", "1");
  TcpStoreServer server("127.0.0.1", 0);
  int fd = authtest::connectRaw(server.port());
  authtest::sendBytes(fd, {'C', 'H', 'S', 'T', 1, 0});
  const auto start = authtest::Clock::now();
  EXPECT_TRUE(authtest::closedWithin(fd, 8s));
  EXPECT_GE(authtest::Clock::now() - start, 500ms);
  ::close(fd);
  auto store = makeTcpStore("127.0.0.1", server.port(), 5s);
  store->set("k", {1});
  EXPECT_EQ(store->get("k", 1s), Store::Bytes{1});
}

// Without a key, a connection that never sends a request is dropped at the frame deadline; a get
// parked for longer than that is not cut, and a client whose idle pooled connection was dropped
// opens a new one.
TEST(StoreLimits, ASilentClientIsDroppedWithoutAKeyButLongWaitsAreNot) {
  auth::forgetRefusals();
  ScopedEnv env;
  env.set("CHORUS_AUTH_KEY_FILE", nullptr);
  env.set("CHORUS_STORE_FRAME_TIMEOUT", "1");
  TcpStoreServer server("127.0.0.1", 0);
  auto store = makeTcpStore("127.0.0.1", server.port(), 10s);
  ::testing::internal::CaptureStderr();
  int silent = authtest::connectRaw(server.port());
  const auto start = authtest::Clock::now();
  auto waiter = std::async(std::launch::async, [&] {
    auto s = makeTcpStore("127.0.0.1", server.port(), 10s);
    return s->get("late", 8s);  // parked for about 2.5 s: longer than the frame deadline
  });
  EXPECT_TRUE(authtest::closedWithin(silent, 8s)) << "a silent connection was kept";
  EXPECT_GE(authtest::Clock::now() - start, 500ms);
  ::close(silent);
  std::this_thread::sleep_for(1500ms);  // the store's own pooled connection idles past it too
  store->set("late", {4, 2});
  EXPECT_EQ(waiter.get(), (Store::Bytes{4, 2}));
  EXPECT_EQ(store->get("late", 1s), (Store::Bytes{4, 2}));
  for (int i = 0; i < 100 && auth::refusalsLogged() < 1; ++i) std::this_thread::sleep_for(10ms);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("no request within the frame deadline after connecting"));
}

}  // namespace
}  // namespace chorus
