// The accepting side of the authentication handshake (auth/server_handshake.h) over any bytes,
// fed in pieces whose sizes the input's first byte chooses: it never accepts a client that did
// not prove the key (the input cannot know the server's fresh nonce), never uses more bytes than
// it was given or any once it is done, and says why whenever it refuses.
#include "auth/handshake_messages.h"
#include "auth/server_handshake.h"
#include "fuzz_check.h"

#include <cstdint>
#include <string>
#include <vector>

using namespace chorus;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const auth::JobKey key(std::vector<uint8_t>(32, 0x5a));
  const size_t piece = 1 + data[0] % 48;
  ++data;
  --size;
  auth::ServerHandshake hs(key, {'f', 'u', 'z', 'z'});
  size_t at = 0;
  while (at < size) {
    const size_t n = std::min(piece, size - at);
    const bool running = hs.state() == auth::ServerHandshake::State::kRunning;
    const size_t used = hs.take(data + at, n);
    if (used > n) fuzz::finding("the handshake used more bytes than it was given");
    if (!running && used != 0) fuzz::finding("a finished handshake kept using bytes");
    if (hs.state() == auth::ServerHandshake::State::kAccepted) {
      fuzz::finding("the handshake accepted a client that cannot know the server's nonce");
    }
    const size_t out = hs.output().size();
    if (out != 0 && out != auth::kAnswerBytes && out != auth::kVerdictBytes) {
      fuzz::finding("the handshake produced a message of an unexpected size");
    }
    hs.output().clear();
    at += used == 0 ? n : used;
  }
  if (hs.state() == auth::ServerHandshake::State::kRefused && hs.failure().empty()) {
    fuzz::finding("the handshake refused a client without saying why");
  }
  // The client's parsers over the same bytes.
  if (size >= auth::kVerdictBytes) {
    std::string why;
    auto verdict = auth::decodeVerdict(data, &why);
    if (!verdict && why.empty()) fuzz::finding("decodeVerdict refused without saying why");
  }
  return 0;
}
