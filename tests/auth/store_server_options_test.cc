// A TCP store server and its clients given their settings as arguments (AuthOptions,
// StoreLimits): the arguments decide, whatever the environment says, and a client proves the
// key it was given.
#include "auth_test_util.h"
#include "harness/first_line.h"
#include "unit/scoped_env.h"

#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

namespace chorus {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(StoreServerOptions, ArgumentsDecideNotTheEnvironment) {
  test::ScratchDir dir;
  const std::string key = authtest::writeKey(dir, "job.key");
  const std::string other = authtest::writeKey(dir, "other.key");
  ScopedEnv env;
  env.set("CHORUS_AUTH", nullptr);
  env.set("CHORUS_AUTH_KEY_FILE", other.c_str());  // neither the server's nor its client's
  env.set("CHORUS_STORE_MAX_KEY", nullptr);
  AuthOptions auth;
  auth.keyFile = key;
  StoreLimits limits;
  limits.maxKeyBytes = 32;
  TcpStoreServer server("127.0.0.1", 0, auth, limits);

  auto store = makeTcpStore("127.0.0.1", server.port(), 5s, auth);
  store->set("short", {1});
  EXPECT_EQ(store->get("short", 1s), Store::Bytes{1});
  EXPECT_THAT(errorOf([&] { store->set(std::string(40, 'k'), {1}); }),
              HasSubstr("CHORUS_STORE_MAX_KEY"));
  auto viaUrl =
      openStore("tcp://127.0.0.1:" + std::to_string(server.port()), 5s, auth);  // same key
  EXPECT_EQ(viaUrl->get("short", 1s), Store::Bytes{1});

  // The environment's key (the default client's) is not the server's: refused.
  EXPECT_THAT(errorOf([&] { makeTcpStore("127.0.0.1", server.port(), 5s)->set("x", {1}); }),
              HasSubstr("key"));
  // No key at all: told that the store requires one.
  EXPECT_THAT(
      errorOf([&] { makeTcpStore("127.0.0.1", server.port(), 5s, AuthOptions{})->set("x", {1}); }),
      HasSubstr("key"));
}

TEST(StoreServerOptions, RequiredWithoutAKeyIsRefusedAtConstruction) {
  ScopedEnv env;
  env.set("CHORUS_AUTH", nullptr);
  env.set("CHORUS_AUTH_KEY_FILE", nullptr);
  AuthOptions auth;
  auth.mode = AuthMode::kRequired;
  EXPECT_THAT(errorOf([&] { TcpStoreServer("127.0.0.1", 0, auth, StoreLimits{}); }),
              HasSubstr("CHORUS_AUTH=required"));
}

TEST(StoreServerOptions, LimitsFromTheEnvironmentThroughStoreLimitsFromEnv) {
  ScopedEnv env;
  env.set("CHORUS_STORE_MAX_KEY", "100");
  env.set("CHORUS_STORE_MAX_VALUE", "200");
  env.set("CHORUS_STORE_MAX_CONNECTIONS", "7");
  env.set("CHORUS_STORE_FRAME_TIMEOUT", "9");
  const StoreLimits l = StoreLimits::fromEnv();
  EXPECT_EQ(l.maxKeyBytes, 100u);
  EXPECT_EQ(l.maxValueBytes, 200u);
  EXPECT_EQ(l.maxConnections, 7u);
  EXPECT_EQ(l.frameTimeout, 9s);
  EXPECT_EQ(Options::fromEnv().storeLimits.maxKeyBytes, 100u);
  env.set("CHORUS_STORE_MAX_KEY", "0");
  EXPECT_THAT(errorOf([] { (void)StoreLimits::fromEnv(); }),
              HasSubstr("CHORUS_STORE_MAX_KEY='0' is not a number in [1, 1048576]"));
}

// chorus-store takes the same settings as flags (and from the environment in its main only):
// --key-file and --max-key decide over the variables.
TEST(StoreServerOptions, ChorusStoreFlagsDecideOverTheEnvironment) {
  const std::string exe = CHORUS_BIN_DIR "/chorus-store/chorus-store";
  ASSERT_EQ(::access(exe.c_str(), X_OK), 0) << exe << " is not built";
  test::ScratchDir dir;
  const std::string key = authtest::writeKey(dir, "job.key");
  const std::string other = authtest::writeKey(dir, "other.key");
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    ::setenv("CHORUS_AUTH_KEY_FILE", other.c_str(), 1);
    ::setenv("CHORUS_STORE_MAX_KEY", "4096", 1);
    ::execl(exe.c_str(), exe.c_str(), "--host", "127.0.0.1", "--port", "0", "--key-file",
            key.c_str(), "--max-key=16", nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  const std::string line = chorus::testing::readFirstLine(out[0]);
  const std::string prefix = "chorus-store listening on tcp://127.0.0.1:";
  if (line.rfind(prefix, 0) == 0) {
    const int port = std::stoi(line.substr(prefix.size()));
    AuthOptions auth;
    auth.keyFile = key;
    auto store = makeTcpStore("127.0.0.1", port, 5s, auth);
    store->set("short", {1});
    EXPECT_THAT(errorOf([&] { store->set(std::string(20, 'k'), {1}); }),
                HasSubstr("CHORUS_STORE_MAX_KEY"));
    auth.keyFile = other;
    EXPECT_THAT(errorOf([&] { makeTcpStore("127.0.0.1", port, 5s, auth)->set("x", {1}); }),
                HasSubstr("key"));
  } else {
    ADD_FAILURE() << "chorus-store printed: " << line;
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace chorus
