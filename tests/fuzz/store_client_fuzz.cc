// The TCP store client over any response bytes: a stand-in server reads one request and answers
// with the input (after its first byte, which picks the call), then hangs up. The call must return
// or throw chorus::Error; it never connects anywhere but this process.
#include "fuzz_check.h"
#include "loopback.h"
#include "store/tcp_store_protocol.h"

#include <chorus/store.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

using namespace chorus;
namespace proto = chorus::store::proto;

namespace {

constexpr int kTimeoutMs = 10000;

int listener(int* port) {
  static int port_ = 0;
  static int fd = fuzz::listenLoopback(&port_);
  *port = port_;
  return fd;
}

// Serves one connection: reads the request frame, sends `response`, and waits for the client to
// hang up so that the client sees the whole response before the close.
void serveOnce(int listen_fd, const uint8_t* response, size_t size) {
  int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) fuzz::finding("accept failed");
  fuzz::setTimeouts(fd, kTimeoutMs);
  uint8_t header[proto::kHeaderSize];
  if (fuzz::readExactly(fd, header, sizeof(header))) {
    std::vector<uint8_t> body(proto::parseHeader(header).body_len);
    if (fuzz::readExactly(fd, body.data(), body.size())) {
      fuzz::sendAll(fd, response, size);
      ::shutdown(fd, SHUT_WR);
      std::vector<uint8_t> rest;
      (void)fuzz::readToEnd(fd, &rest);
    }
  }
  ::close(fd);
}

void callOne(Store& store, uint8_t which) {
  const std::chrono::milliseconds timeout(1000);
  switch (which % 5) {
    case 0:
      store.set("key", {1, 2, 3});
      break;
    case 1:
      (void)store.get("key", timeout);
      break;
    case 2:
      (void)store.add("counter", 1);
      break;
    case 3:
      (void)store.check({"a", "b"});
      break;
    case 4:
      store.wait({"a", "b"}, timeout);
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  int port = 0;
  int listen_fd = listener(&port);
  std::thread server(serveOnce, listen_fd, data + 1, size - 1);
  try {
    // The constructor connects; the stand-in server accepts that connection.
    std::shared_ptr<Store> store =
        makeTcpStore("127.0.0.1", port, std::chrono::milliseconds(kTimeoutMs));
    callOne(*store, data[0]);
  } catch (const Error& e) {
    fuzz::requireMessage(e);
  }
  server.join();
  return 0;
}
