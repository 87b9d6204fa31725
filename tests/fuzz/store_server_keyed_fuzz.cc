// The TCP store server with a job key over any bytes: a fresh server per input; the first client
// authenticates with the key and then sends the first part of the input (as in store_server_fuzz:
// the first byte says how much), so the requests reach the parser behind the handshake; the
// second client sends the rest without authenticating (the handshake's parser and the refusal
// of strangers). The first must get well-formed reply frames, and the server must close both.
#include "auth/client_handshake.h"
#include "auth/key_file.h"
#include "fuzz_check.h"
#include "loopback.h"
#include "store/tcp_store_protocol.h"
#include "store_replies.h"

#include <chorus/store.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

using namespace chorus;

namespace {

constexpr int kTimeoutMs = 10000;
const std::vector<uint8_t> kStoreContext = {'s', 't', 'o', 'r', 'e'};

// The key every server and client of this process uses, in a private file named by
// CHORUS_AUTH_KEY_FILE (the server reads it from there).
const auth::JobKey& jobKey() {
  static const auth::JobKey key = [] {
    char dir[] = "/tmp/chorus-fuzz-key-XXXXXX";
    if (!::mkdtemp(dir)) fuzz::finding("mkdtemp");
    const std::string path = std::string(dir) + "/key";
    auth::JobKey k(std::vector<uint8_t>(32, 0x6b));
    auth::writeKeyFile(path, k);
    ::setenv("CHORUS_AUTH_KEY_FILE", path.c_str(), 1);
    ::setenv("CHORUS_HANDSHAKE_TIMEOUT", "2", 1);
    return k;
  }();
  return key;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auth::JobKey& key = jobKey();
  const size_t first = std::min<size_t>(data[0], size - 1);
  TcpStoreServer server("127.0.0.1", 0);
  int a = fuzz::connectLoopback(server.port(), kTimeoutMs);
  int b = fuzz::connectLoopback(server.port(), kTimeoutMs);
  if (a < 0 || b < 0) fuzz::finding("cannot connect to the store server");
  auto result = auth::authenticateToServer(a, key, kStoreContext,
                                           Deadline::after(std::chrono::milliseconds(kTimeoutMs)));
  if (!result.ok()) fuzz::finding("a client with the key was refused by the store server");
  fuzz::sendAll(a, data + 1, first);
  fuzz::sendAll(b, data + 1 + first, size - 1 - first);
  for (int fd : {b, a}) {
    ::shutdown(fd, SHUT_WR);
    std::vector<uint8_t> replies;
    if (!fuzz::readToEnd(fd, &replies)) {
      fuzz::finding("the store server neither answered nor closed the connection");
    }
    ::close(fd);
    if (fd == a) fuzz::checkStoreReplies(replies);
  }
  return 0;
}
