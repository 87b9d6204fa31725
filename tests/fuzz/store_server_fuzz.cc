// The TCP store server over any request bytes: a fresh server per input and two clients. The first
// byte says how many of the following bytes the first client sends; the second client sends the
// rest (so one can park on a key that the other sets), hangs up and reads its replies, then the
// first hangs up and reads its own. The server must answer with well-formed frames and close each
// connection; a server that does neither within the timeout is a finding (a hang).
#include "fuzz_check.h"
#include "loopback.h"
#include "store/tcp_store_protocol.h"
#include "store_replies.h"

#include <chorus/store.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

using namespace chorus;

namespace {

constexpr int kTimeoutMs = 10000;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t first = std::min<size_t>(data[0], size - 1);
  TcpStoreServer server("127.0.0.1", 0);
  int a = fuzz::connectLoopback(server.port(), kTimeoutMs);
  int b = fuzz::connectLoopback(server.port(), kTimeoutMs);
  if (a < 0 || b < 0) fuzz::finding("cannot connect to the store server");
  fuzz::sendAll(a, data + 1, first);
  fuzz::sendAll(b, data + 1 + first, size - 1 - first);
  for (int fd : {b, a}) {
    ::shutdown(fd, SHUT_WR);
    std::vector<uint8_t> replies;
    if (!fuzz::readToEnd(fd, &replies)) {
      fuzz::finding("the store server neither answered nor closed the connection");
    }
    ::close(fd);
    fuzz::checkStoreReplies(replies);
  }
  return 0;
}
