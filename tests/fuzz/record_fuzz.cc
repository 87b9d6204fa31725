// The encrypted record stream of a connection between ranks (transport/tcp/sealed_stream.h) over
// any bytes: the input's first byte says how many valid records the harness seals first (from
// length-prefixed pieces of the input) and whether to flip one bit of what it sealed; the rest of
// the input follows as raw bytes. Read back through a socket, the stream must yield exactly the
// plaintext of the valid records before the first altered or foreign byte, then fail saying why
// (or end cleanly), never crash, hang, or hand out bytes that did not come from the sealer.
#include "auth/record_cipher.h"
#include "fuzz_check.h"
#include "transport/tcp/sealed_stream.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

using namespace chorus;
using transport::tcp::SealedStream;

namespace {

auth::StreamKeys keysOf(auth::Role role) {
  static const auth::JobKey key(std::vector<uint8_t>(32, 0x3c));
  static const auth::Nonce c{1}, s{2};
  return auth::deriveStreamKeys(key, role, std::vector<uint8_t>{'f', 'u', 'z', 'z'}, c, s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t valid = data[0] & 3;
  const bool flip = (data[0] & 0x80) != 0;
  const size_t flipAt = data[1];
  data += 2;
  size -= 2;

  // The wire: sealed records, then raw bytes.
  auth::RecordCipher sealer(keysOf(auth::Role::kClient).send, auth::RecordCipher::Direction::kSeal);
  std::vector<uint8_t> wire, plain;
  for (size_t i = 0; i < valid && size > 0; ++i) {
    const size_t n = std::min<size_t>(1 + data[0], size - 1);
    if (n == 0) break;
    const std::array<std::span<const uint8_t>, 1> part = {std::span(data + 1, n)};
    std::vector<uint8_t> record(n + auth::kRecordOverhead);
    sealer.seal(part, record.data());
    wire.insert(wire.end(), record.begin(), record.end());
    plain.insert(plain.end(), data + 1, data + 1 + n);
    data += 1 + n;
    size -= 1 + n;
  }
  const bool altered = flip && flipAt < wire.size();
  if (altered) wire[flipAt] ^= 0x01;
  wire.insert(wire.end(), data, data + size);

  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) fuzz::finding("socketpair");
  int sndbuf = 1 << 20;
  setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
  size_t sent = 0;
  SealedStream reader(keysOf(auth::Role::kServer));
  std::vector<uint8_t> got(plain.size() + 256);
  size_t have = 0;
  SealedStream::Step last = SealedStream::Step::kWouldBlock;
  for (int spins = 0; spins < 100000; ++spins) {
    if (sent < wire.size()) {
      ssize_t k = ::send(fds[0], wire.data() + sent, wire.size() - sent, MSG_DONTWAIT);
      if (k > 0) sent += static_cast<size_t>(k);
      if (sent == wire.size()) ::shutdown(fds[0], SHUT_WR);
    } else if (wire.empty()) {
      ::shutdown(fds[0], SHUT_WR);
    }
    if (have == got.size()) got.resize(got.size() * 2);
    last = reader.read(fds[1], got.data(), got.size(), have);
    if (last == SealedStream::Step::kClosed || last == SealedStream::Step::kFailed) break;
    if (last == SealedStream::Step::kWouldBlock) {
      pollfd p{fds[1], POLLIN, 0};
      ::poll(&p, 1, 10);
    }
  }
  ::close(fds[0]);
  ::close(fds[1]);
  if (last != SealedStream::Step::kClosed && last != SealedStream::Step::kFailed) {
    fuzz::finding("the record stream neither ended nor failed");
  }
  if (last == SealedStream::Step::kFailed && reader.why().empty()) {
    fuzz::finding("the record stream failed without saying why");
  }
  // What came out is a prefix of what was sealed (whole records), all of it when untouched.
  if (have > plain.size() ||
      !std::equal(got.begin(), got.begin() + static_cast<long>(have), plain.begin())) {
    fuzz::finding("the record stream handed out bytes that were not sealed");
  }
  if (!altered && have != plain.size()) fuzz::finding("valid records were not all delivered");
  if (!altered && size == 0 && last != SealedStream::Step::kClosed) {
    fuzz::finding("an untouched stream did not end cleanly");
  }
  return 0;
}
