#include "harness/etcd_server.h"

#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace chorus::testing {
namespace {

std::string tail(const std::string& path, size_t bytes) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  std::string s = all.str();
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

}  // namespace

int freeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("no free loopback port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string EtcdServer::binary(std::string* why) {
  if (const char* env = std::getenv("CHORUS_ETCD"); env != nullptr && *env != 0) {
    if (::access(env, X_OK) == 0) return env;
    *why = std::string("$CHORUS_ETCD (") + env + ") is not an executable";
    return "";
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/etcd";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  *why = "no etcd binary on PATH (scripts/install-deps installs Debian's etcd-server)";
  return "";
}

EtcdServer::EtcdServer(std::chrono::milliseconds startup) {
  std::string why;
  const std::string exe = binary(&why);
  if (exe.empty()) throw std::runtime_error(why);
  const std::string base = std::filesystem::is_directory("/dev/shm")
                               ? "/dev/shm"
                               : std::filesystem::temp_directory_path().string();
  std::string pattern = base + "/chorus-etcd-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + pattern);
  dir_ = pattern;
  clientPort_ = freeLoopbackPort();
  const int peerPort = freeLoopbackPort();
  const std::string client = "http://127.0.0.1:" + std::to_string(clientPort_);
  const std::string peer = "http://127.0.0.1:" + std::to_string(peerPort);
  // Heartbeat and election in tens of milliseconds: a lone member elects itself at once.
  std::vector<std::string> args = {exe,
                                   "--name=test",
                                   "--data-dir=" + dir_ + "/data",
                                   "--listen-client-urls=" + client,
                                   "--advertise-client-urls=" + client,
                                   "--listen-peer-urls=" + peer,
                                   "--initial-advertise-peer-urls=" + peer,
                                   "--initial-cluster=test=" + peer,
                                   "--heartbeat-interval=10",
                                   "--election-timeout=100",
                                   "--log-level=warn"};
  const std::string log = dir_ + "/log";
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  const auto until = std::chrono::steady_clock::now() + startup;
  std::string last;
  for (;;) {
    try {
      openStore(url("startup"), std::chrono::milliseconds(200));
      return;
    } catch (const Error& e) {
      last = e.what();
    }
    std::string failure;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      failure = exe + " exited at start-up: " + tail(log, 2000);
    } else if (std::chrono::steady_clock::now() >= until) {
      failure = exe + " did not serve within " + std::to_string(startup.count()) + " ms (" + last +
                "); its log ends: " + tail(log, 2000);
    }
    if (!failure.empty()) {
      kill();
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      throw std::runtime_error(failure);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

EtcdServer::~EtcdServer() {
  kill();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void EtcdServer::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string EtcdServer::endpoint() const { return "127.0.0.1:" + std::to_string(clientPort_); }

std::string EtcdServer::url(const std::string& prefix) const {
  return "etcd://" + endpoint() + "/" + prefix;
}

}  // namespace chorus::testing
