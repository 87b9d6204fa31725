// Key files: a private regular file of this user is read as is; anything else is refused with
// an error that names the path and what is wrong with it.
#include "auth/key_file.h"
#include "auth/settings.h"
#include "auth_test_util.h"
#include "unit/scoped_env.h"

#include <chorus/error.hpp>

#include <gtest/gtest.h>

#include <fstream>

namespace chorus {
namespace {

std::string refusal(const std::string& path) {
  try {
    auth::loadKeyFile(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(KeyFile, PrivateFileIsReadAsIs) {
  test::ScratchDir dir;
  const std::string path = authtest::writeKey(dir, "k");
  auth::JobKey key = auth::loadKeyFile(path);
  EXPECT_EQ(key.bytes().size(), auth::kGeneratedKeyBytes);
  EXPECT_EQ(key.fingerprint(), auth::loadKeyFile(path).fingerprint());
  EXPECT_EQ(key.fingerprint().size(), 16u);
}

TEST(KeyFile, GroupOrWorldReadableIsRefusedNamingPathAndMode) {
  test::ScratchDir dir;
  for (mode_t mode : {0644, 0640, 0604, 0620}) {
    const std::string path = authtest::writeKey(dir, "k" + std::to_string(mode), mode);
    const std::string what = refusal(path);
    char shown[8];
    std::snprintf(shown, sizeof(shown), "%04o", static_cast<unsigned>(mode));
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(std::string("mode ") + shown), std::string::npos) << what;
    EXPECT_NE(what.find("chmod 600"), std::string::npos) << what;
  }
}

TEST(KeyFile, NotARegularFileOrWrongSizeIsRefused) {
  test::ScratchDir dir;
  ::chmod(dir.path().c_str(), 0700);
  EXPECT_NE(refusal(dir.path()).find("not a regular file"), std::string::npos);
  EXPECT_NE(refusal(dir.path() + "/missing").find("cannot open"), std::string::npos);
  const std::string shortKey = dir.path() + "/short";
  std::ofstream(shortKey) << "tooshort";
  ::chmod(shortKey.c_str(), 0600);
  EXPECT_NE(refusal(shortKey).find("8 bytes"), std::string::npos) << refusal(shortKey);
  const std::string longKey = dir.path() + "/long";
  std::ofstream(longKey) << std::string(auth::kMaxKeyBytes + 1, 'x');
  ::chmod(longKey.c_str(), 0600);
  EXPECT_NE(refusal(longKey).find("bytes; a key has"), std::string::npos);
}

TEST(AuthSettings, ModesAndTheirErrors) {
  test::ScratchDir dir;
  ScopedEnv env;
  auto fromEnv = [] { return auth::authSettingsFrom(AuthOptions::fromEnv()); };
  env.set("CHORUS_AUTH_KEY_FILE", nullptr);
  env.set("CHORUS_AUTH", "required");
  EXPECT_THROW(fromEnv().requireKeyIfAsked("test"), Error);
  env.set("CHORUS_AUTH", "sometimes");
  EXPECT_THROW(fromEnv(), Error);
  const std::string path = authtest::writeKey(dir, "k");
  env.set("CHORUS_AUTH_KEY_FILE", path.c_str());
  env.set("CHORUS_AUTH", "off");
  EXPECT_FALSE(fromEnv().enabled());
  env.set("CHORUS_AUTH", nullptr);
  EXPECT_TRUE(fromEnv().enabled());
  env.set("CHORUS_HANDSHAKE_TIMEOUT", "0");
  EXPECT_THROW(fromEnv(), Error);
  env.set("CHORUS_HANDSHAKE_TIMEOUT", "7");
  env.set("CHORUS_ENCRYPT", "1");
  const auto s = fromEnv();
  EXPECT_EQ(s.handshakeTime, std::chrono::seconds(7));
  EXPECT_TRUE(s.encrypt);
  EXPECT_EQ(s.keyPath, path);
  // Options::fromEnv reads the same (Options::auth).
  const Options o = Options::fromEnv();
  EXPECT_EQ(o.auth.keyFile, path);
  EXPECT_EQ(o.auth.handshakeTimeout, std::chrono::seconds(7));
  EXPECT_TRUE(o.auth.encrypt);
}

// The same settings given in code, the environment aside.
TEST(AuthSettings, FromOptionsSetInCode) {
  test::ScratchDir dir;
  ScopedEnv env;
  env.set("CHORUS_AUTH_KEY_FILE", nullptr);
  env.set("CHORUS_AUTH", nullptr);
  AuthOptions o;
  EXPECT_FALSE(auth::authSettingsFrom(o).enabled());
  o.mode = AuthMode::kRequired;
  EXPECT_THROW(auth::authSettingsFrom(o).requireKeyIfAsked("test"), Error);
  o.keyFile = authtest::writeKey(dir, "k");
  const auto s = auth::authSettingsFrom(o);
  EXPECT_TRUE(s.enabled());
  s.requireKeyIfAsked("test");
  o.mode = AuthMode::kOff;
  EXPECT_FALSE(auth::authSettingsFrom(o).enabled());
  o.mode = AuthMode::kAuto;
  o.keyFile = dir.path() + "/missing";
  EXPECT_THROW(auth::authSettingsFrom(o), Error);  // the key file is checked when loaded
}

}  // namespace
}  // namespace chorus
