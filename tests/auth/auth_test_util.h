// Helpers of the authentication tests: key files, raw connections that play the attacker, and
// a wait for the other side to close a connection.
#pragma once

#include "auth/handshake_messages.h"
#include "auth/job_key.h"
#include "auth/key_file.h"
#include "harness/scratch_dir.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace chorus::authtest {

using Clock = std::chrono::steady_clock;

// Writes a fresh random key to dir/name with the given mode; returns the path.
inline std::string writeKey(const test::ScratchDir& dir, const std::string& name,
                            mode_t mode = 0600) {
  const std::string path = dir.path() + "/" + name;
  auth::writeKeyFile(path, auth::JobKey::random());
  ::chmod(path.c_str(), mode);
  return path;
}

// A blocking TCP connection to 127.0.0.1:port (or ip:port); -1 when it cannot connect.
inline int connectRaw(int port, const std::string& ip = "127.0.0.1") {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline void sendBytes(int fd, const std::vector<uint8_t>& bytes) {
  (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
}

// Reads (and discards) until the peer closes or `limit` passes; true when it closed.
inline bool closedWithin(int fd, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  char sink[512];
  while (Clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (::poll(&p, 1, static_cast<int>(std::max<long>(left.count(), 1))) <= 0) continue;
    ssize_t n = ::recv(fd, sink, sizeof(sink), 0);
    if (n <= 0) return true;
  }
  return false;
}

// Runs a client's side of the handshake by hand on `fd` and returns every byte the client sent
// (challenge and proof): what an eavesdropper records, to replay later. *accepted tells whether
// the server's verdict accepted it.
inline std::vector<uint8_t> recordHandshake(int fd, const auth::JobKey& key,
                                            const std::vector<uint8_t>& context, bool* accepted) {
  using namespace auth;
  const Nonce mine = freshNonce();
  std::vector<uint8_t> sent(kChallengeBytes + kProofBytes);
  encodeMessage(MessageKind::kChallenge, mine, sent.data());
  sendBytes(fd, std::vector<uint8_t>(sent.begin(), sent.begin() + kChallengeBytes));
  uint8_t answer[kAnswerBytes];
  *accepted = false;
  if (::recv(fd, answer, sizeof(answer), MSG_WAITALL) != static_cast<ssize_t>(sizeof(answer))) {
    return sent;
  }
  Nonce theirs{};
  std::copy(answer + 8, answer + 8 + kNonceBytes, theirs.begin());
  const Mac proof = handshakeMac(key, Role::kClient, context, mine, theirs);
  encodeMessage(MessageKind::kProof, proof, sent.data() + kChallengeBytes);
  sendBytes(fd, std::vector<uint8_t>(sent.begin() + kChallengeBytes, sent.end()));
  uint8_t verdict[kVerdictBytes];
  std::string why;
  if (::recv(fd, verdict, sizeof(verdict), MSG_WAITALL) == static_cast<ssize_t>(sizeof(verdict))) {
    auto r = decodeVerdict(verdict, &why);
    *accepted = r && *r == Refusal::kNone;
  }
  return sent;
}

inline std::vector<uint8_t> randomBytes(size_t n, unsigned seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1103515245u + 12345u;
    v[i] = static_cast<uint8_t>(seed >> 16);
  }
  return v;
}

}  // namespace chorus::authtest
