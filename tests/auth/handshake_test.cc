// The handshake itself: both sides holding the key succeed; a wrong key, a replayed
// transcript, random bytes and a foreign protocol are refused with the reason.
#include "auth/client_handshake.h"
#include "auth/handshake_messages.h"
#include "auth/server_handshake.h"
#include "auth_test_util.h"

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <thread>

namespace chorus {
namespace {

using auth::ServerHandshake;
const std::vector<uint8_t> kContext = {'t', 'e', 's', 't'};

// Drives a ServerHandshake over one end of a socket pair until it is done.
ServerHandshake::State serve(ServerHandshake& hs, int fd) {
  uint8_t buf[128];
  while (hs.state() == ServerHandshake::State::kRunning) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    hs.take(buf, static_cast<size_t>(n));
    auto& out = hs.output();
    if (!out.empty()) (void)::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
    out.clear();
  }
  return hs.state();
}

struct Outcome {
  ServerHandshake::State server;
  std::string serverWhy;
  auth::ClientResult client;
};

Outcome run(const auth::JobKey& serverKey, const auth::JobKey& clientKey,
            const std::vector<uint8_t>& serverContext = kContext) {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  ServerHandshake hs(serverKey, serverContext);
  Outcome o{};
  std::thread server([&] {
    o.server = serve(hs, sv[0]);
    ::shutdown(sv[0], SHUT_RDWR);
  });
  o.client = auth::authenticateToServer(sv[1], clientKey, kContext,
                                        Deadline::after(std::chrono::seconds(10)));
  server.join();
  o.serverWhy = hs.failure();
  ::close(sv[0]);
  ::close(sv[1]);
  return o;
}

TEST(Handshake, SameKeyIsAcceptedBothWays) {
  auth::JobKey key = auth::JobKey::random();
  Outcome o = run(key, key);
  EXPECT_EQ(o.server, ServerHandshake::State::kAccepted);
  EXPECT_TRUE(o.client.ok()) << o.client.why;
}

TEST(Handshake, WrongKeyIsRefusedOnBothSides) {
  Outcome o = run(auth::JobKey::random(), auth::JobKey::random());
  EXPECT_EQ(o.server, ServerHandshake::State::kRefused);
  EXPECT_EQ(o.serverWhy, "wrong key");
  EXPECT_EQ(o.client.outcome, auth::ClientOutcome::kRefused);
  EXPECT_NE(o.client.why.find("wrong key"), std::string::npos) << o.client.why;
}

TEST(Handshake, ProofForAnotherContextIsRefused) {
  auth::JobKey key = auth::JobKey::random();
  Outcome o = run(key, key, {'o', 't', 'h', 'e', 'r'});
  EXPECT_EQ(o.server, ServerHandshake::State::kRefused);
  EXPECT_FALSE(o.client.ok());
}

TEST(Handshake, ReplayedTranscriptIsRefused) {
  auth::JobKey key = auth::JobKey::random();
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  ServerHandshake first(key, kContext);
  std::thread server([&] { serve(first, sv[0]); });
  bool accepted = false;
  std::vector<uint8_t> recorded = authtest::recordHandshake(sv[1], key, kContext, &accepted);
  server.join();
  ::close(sv[0]);
  ::close(sv[1]);
  ASSERT_TRUE(accepted);
  ASSERT_EQ(first.state(), ServerHandshake::State::kAccepted);

  // The same bytes to a new server: its nonce differs, so the recorded proof is worthless.
  ServerHandshake second(key, kContext);
  second.take(recorded.data(), recorded.size());
  EXPECT_EQ(second.state(), ServerHandshake::State::kRefused);
  EXPECT_EQ(second.failure(), "wrong key");
}

TEST(Handshake, ReflectedServerProofIsRefused) {
  // A stranger echoes the server's own MAC back as its proof: the role label tells them apart.
  auth::JobKey key = auth::JobKey::random();
  ServerHandshake hs(key, kContext);
  uint8_t challenge[auth::kChallengeBytes];
  const auth::Nonce nonce = auth::freshNonce();
  auth::encodeMessage(auth::MessageKind::kChallenge, nonce, challenge);
  hs.take(challenge, sizeof(challenge));
  ASSERT_EQ(hs.output().size(), auth::kAnswerBytes);
  uint8_t proof[auth::kProofBytes];
  auth::encodeMessage(
      auth::MessageKind::kProof,
      std::span<const uint8_t>(hs.output().data() + 8 + auth::kNonceBytes, auth::kMacBytes), proof);
  hs.take(proof, sizeof(proof));
  EXPECT_EQ(hs.state(), ServerHandshake::State::kRefused);
  EXPECT_EQ(hs.failure(), "wrong key");
}

TEST(Handshake, RandomBytesAndForeignProtocolsAreRefused) {
  auth::JobKey key = auth::JobKey::random();
  for (unsigned seed = 1; seed <= 50; ++seed) {
    ServerHandshake hs(key, kContext);
    auto junk = authtest::randomBytes(200, seed);
    size_t used = hs.take(junk.data(), junk.size());
    EXPECT_LE(used, junk.size());
    EXPECT_EQ(hs.state(), ServerHandshake::State::kRefused) << "seed " << seed;
    EXPECT_FALSE(hs.failure().empty());
  }
  ServerHandshake hs(key, kContext);
  const uint8_t storeFrame[12] = {'C', 'H', 'S', 'T', 1, 0, 1, 0, 0, 0, 0, 0};
  hs.take(storeFrame, sizeof(storeFrame));
  EXPECT_TRUE(hs.noHandshake());
  EXPECT_NE(hs.failure().find("no key"), std::string::npos);
  // The right magic with a bad version or kind: malformed, and the client is told.
  ServerHandshake bad(key, kContext);
  uint8_t challenge[auth::kChallengeBytes] = {};
  auth::encodeMessage(auth::MessageKind::kProof, {}, challenge);
  bad.take(challenge, sizeof(challenge));
  EXPECT_EQ(bad.state(), ServerHandshake::State::kRefused);
  EXPECT_EQ(bad.output().size(), auth::kVerdictBytes);
}

TEST(Handshake, ByteAtATimeIsTheSameAsAllAtOnce) {
  auth::JobKey key = auth::JobKey::random();
  ServerHandshake hs(key, kContext);
  uint8_t challenge[auth::kChallengeBytes];
  auth::encodeMessage(auth::MessageKind::kChallenge, auth::freshNonce(), challenge);
  for (uint8_t b : challenge) hs.take(&b, 1);
  EXPECT_EQ(hs.state(), ServerHandshake::State::kRunning);
  EXPECT_EQ(hs.output().size(), auth::kAnswerBytes);
}

}  // namespace
}  // namespace chorus
