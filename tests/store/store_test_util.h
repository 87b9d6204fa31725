// Helpers of the store tests (store_test.cc: every kind of store; tcp_file_store_test.cc: the
// TCP and file stores, openStore and chorus-store).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <chorus/error.hpp>
#include <chorus/store.hpp>

namespace chorus::store_test {

using namespace std::chrono_literals;
using Bytes = Store::Bytes;
using SteadyClock = std::chrono::steady_clock;

inline Bytes bytesOf(const std::string& s) { return Bytes(s.begin(), s.end()); }
inline std::string stringOf(const Bytes& b) { return std::string(b.begin(), b.end()); }

inline long long msSince(SteadyClock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start).count();
}

// Runs fn and returns the code of the chorus::Error it throws (kOk if it does not throw).
template <typename Fn>
ErrorCode errorOf(Fn&& fn, std::string* message = nullptr) {
  try {
    fn();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  return ErrorCode::kOk;
}

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/chorus-store-test-XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    if (made == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A port that was free a moment ago.
inline int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A plain blocking socket connected to 127.0.0.1:port, for speaking raw bytes to the server.
class RawSocket {
 public:
  explicit RawSocket(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      throw std::runtime_error("raw connect failed");
    }
  }
  ~RawSocket() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void send(const std::vector<uint8_t>& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Reads exactly n bytes (fewer if the connection closes or the timeout passes).
  std::vector<uint8_t> recvExact(size_t n, std::chrono::milliseconds timeout) {
    std::vector<uint8_t> out(n);
    size_t got = 0;
    auto deadline = SteadyClock::now() + timeout;
    while (got < n && SteadyClock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    out.resize(got);
    return out;
  }
  // True when the server closes the connection within the timeout.
  bool closedByPeer(std::chrono::milliseconds timeout) {
    auto deadline = SteadyClock::now() + timeout;
    while (SteadyClock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        uint8_t buf[256];
        ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
        if (n <= 0) return true;
      }
    }
    return false;
  }

 private:
  int fd_ = -1;
};

}  // namespace chorus::store_test
