// A one-member etcd on loopback for the tests of the etcd store: its own free ports and a data
// directory in memory (/dev/shm where there is one, so that etcd's fsyncs cost nothing), killed
// and removed at the end. Tests skip, saying why, where no etcd binary is installed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

namespace chorus::testing {

class EtcdServer {
 public:
  // The etcd binary ($CHORUS_ETCD, else etcd on PATH), or "" with *why set.
  static std::string binary(std::string* why);
  // Starts etcd and waits (at most `startup`) until it serves reads. Throws std::runtime_error
  // naming the command and the end of its log when it does not.
  explicit EtcdServer(std::chrono::milliseconds startup = std::chrono::seconds(10));
  ~EtcdServer();
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  int clientPort() const { return clientPort_; }
  // "127.0.0.1:<client port>".
  std::string endpoint() const;
  // "etcd://127.0.0.1:<client port>/<prefix>".
  std::string url(const std::string& prefix) const;
  // Stops it now (SIGKILL), as a lost host would.
  void kill();

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int clientPort_ = 0;
};

// A TCP port on 127.0.0.1 that was free a moment ago (and, closed at once, refuses connections).
int freeLoopbackPort();

}  // namespace chorus::testing
