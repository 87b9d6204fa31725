// Options::fromEnv reads every setting of the library, the sub-structs' too (trace, auth, tcp,
// storeLimits): unset variables keep the structs' defaults, each variable reaches its field, and
// a malformed one is an error that names it, as when each layer read its own.
#include "unit/scoped_env.h"

#include <chorus/error.hpp>
#include <chorus/options.hpp>

#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <utility>
#include <vector>

namespace chorus {
namespace {

const char* const kSubStructVariables[] = {"CHORUS_TRACE_ENTRIES",
                                           "CHORUS_TRACE_DIR",
                                           "CHORUS_TRACE_SIGNAL",
                                           "CHORUS_PROGRESS_SECONDS",
                                           "CHORUS_HEARTBEAT_SECONDS",
                                           "CHORUS_REPORT",
                                           "CHORUS_TRACE_DETAIL_US",
                                           "CHORUS_AUTH",
                                           "CHORUS_AUTH_KEY_FILE",
                                           "CHORUS_HANDSHAKE_TIMEOUT",
                                           "CHORUS_ENCRYPT",
                                           "CHORUS_TCP_ZEROCOPY_BYTES",
                                           "CHORUS_TCP_ZEROCOPY_KEEP",
                                           "CHORUS_STORE_MAX_KEY",
                                           "CHORUS_STORE_MAX_VALUE",
                                           "CHORUS_STORE_MAX_CONNECTIONS",
                                           "CHORUS_STORE_FRAME_TIMEOUT"};

void unsetAll(ScopedEnv& env) {
  for (const char* v : kSubStructVariables) env.set(v, nullptr);
}

TEST(OptionsEnv, UnsetVariablesKeepTheDefaults) {
  ScopedEnv env;
  unsetAll(env);
  const Options o = Options::fromEnv();
  EXPECT_EQ(o.trace.entries, 2048u);
  EXPECT_EQ(o.trace.dir, "");
  EXPECT_EQ(o.trace.signal, 0);
  EXPECT_EQ(o.trace.progressSeconds, 1.0);
  EXPECT_EQ(o.trace.heartbeatSeconds, 0.0);
  EXPECT_FALSE(o.trace.report);
  EXPECT_EQ(o.trace.detailMicros, 20.0);
  EXPECT_EQ(o.auth.mode, AuthMode::kAuto);
  EXPECT_EQ(o.auth.keyFile, "");
  EXPECT_EQ(o.auth.handshakeTimeout, std::chrono::seconds(10));
  EXPECT_FALSE(o.auth.encrypt);
  EXPECT_EQ(o.tcp.zeroCopyBytes, 0u);
  EXPECT_FALSE(o.tcp.zeroCopyKeep);
  EXPECT_EQ(o.storeLimits.maxKeyBytes, 4096u);
  EXPECT_EQ(o.storeLimits.maxValueBytes, 67108848u);
  EXPECT_EQ(o.storeLimits.maxConnections, 1024u);
  EXPECT_EQ(o.storeLimits.frameTimeout, std::chrono::seconds(60));
}

TEST(OptionsEnv, EveryVariableReachesItsField) {
  ScopedEnv env;
  env.set("CHORUS_TRACE_ENTRIES", "0");
  env.set("CHORUS_TRACE_DIR", "/some/dir");
  env.set("CHORUS_TRACE_SIGNAL", "USR2");
  env.set("CHORUS_PROGRESS_SECONDS", "0.25");
  env.set("CHORUS_HEARTBEAT_SECONDS", "2.5");
  env.set("CHORUS_REPORT", "1");
  env.set("CHORUS_TRACE_DETAIL_US", "0");
  env.set("CHORUS_AUTH", "off");
  env.set("CHORUS_AUTH_KEY_FILE", "/some/key");  // a path only: loaded where it is used
  env.set("CHORUS_HANDSHAKE_TIMEOUT", "3");
  env.set("CHORUS_ENCRYPT", "1");
  env.set("CHORUS_TCP_ZEROCOPY_BYTES", "65536");
  env.set("CHORUS_TCP_ZEROCOPY_KEEP", "1");
  env.set("CHORUS_STORE_MAX_KEY", "10");
  env.set("CHORUS_STORE_MAX_VALUE", "20");
  env.set("CHORUS_STORE_MAX_CONNECTIONS", "30");
  env.set("CHORUS_STORE_FRAME_TIMEOUT", "40");
  const Options o = Options::fromEnv();
  EXPECT_EQ(o.trace.entries, 0u);
  EXPECT_EQ(o.trace.dir, "/some/dir");
  EXPECT_EQ(o.trace.signal, SIGUSR2);
  EXPECT_EQ(o.trace.progressSeconds, 0.25);
  EXPECT_EQ(o.trace.heartbeatSeconds, 2.5);
  EXPECT_TRUE(o.trace.report);
  EXPECT_EQ(o.trace.detailMicros, 0.0);
  EXPECT_EQ(o.auth.mode, AuthMode::kOff);
  EXPECT_EQ(o.auth.keyFile, "/some/key");
  EXPECT_EQ(o.auth.handshakeTimeout, std::chrono::seconds(3));
  EXPECT_TRUE(o.auth.encrypt);
  EXPECT_EQ(o.tcp.zeroCopyBytes, 65536u);
  EXPECT_TRUE(o.tcp.zeroCopyKeep);
  EXPECT_EQ(o.storeLimits.maxKeyBytes, 10u);
  EXPECT_EQ(o.storeLimits.maxValueBytes, 20u);
  EXPECT_EQ(o.storeLimits.maxConnections, 30u);
  EXPECT_EQ(o.storeLimits.frameTimeout, std::chrono::seconds(40));
  // Each sub-struct's own reader agrees.
  EXPECT_EQ(TraceOptions::fromEnv().dir, o.trace.dir);
  EXPECT_EQ(AuthOptions::fromEnv().keyFile, o.auth.keyFile);
  EXPECT_EQ(TcpOptions::fromEnv().zeroCopyBytes, o.tcp.zeroCopyBytes);
  EXPECT_EQ(StoreLimits::fromEnv().maxConnections, o.storeLimits.maxConnections);
}

TEST(OptionsEnv, MalformedValuesNameTheVariable) {
  const std::vector<std::pair<const char*, const char*>> bad = {
      {"CHORUS_TRACE_ENTRIES", "many"},
      {"CHORUS_TRACE_SIGNAL", "HUP"},
      {"CHORUS_PROGRESS_SECONDS", "-1"},
      {"CHORUS_TRACE_DETAIL_US", "1.5"},
      {"CHORUS_AUTH", "sometimes"},
      {"CHORUS_HANDSHAKE_TIMEOUT", "0"},
      {"CHORUS_ENCRYPT", "yes"},
      {"CHORUS_TCP_ZEROCOPY_BYTES", "lots"},
      {"CHORUS_TCP_ZEROCOPY_KEEP", "2"},
      {"CHORUS_STORE_MAX_KEY", "0"},
      {"CHORUS_STORE_MAX_VALUE", "67108849"},
      {"CHORUS_STORE_MAX_CONNECTIONS", "0"},
      {"CHORUS_STORE_FRAME_TIMEOUT", "0"}};
  for (const auto& [name, value] : bad) {
    ScopedEnv env;
    unsetAll(env);
    env.set(name, value);
    try {
      (void)Options::fromEnv();
      ADD_FAILURE() << name << "=" << value << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(std::string(name) + "='" + value + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace chorus
