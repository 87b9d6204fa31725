// An etcd on loopback for the tests of the etcd store: one member, or a cluster of several (each
// with its own free ports), data directories in memory (/dev/shm where there is one, so that
// etcd's fsyncs cost nothing), killed and removed at the end. Tests skip, saying why, where no
// etcd binary is installed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace chorus::testing {

class EtcdServer {
 public:
  // The etcd binary ($CHORUS_ETCD, else etcd on PATH), or "" with *why set.
  static std::string binary(std::string* why);
  // Starts `members` members and waits (at most `startup`) until every one serves reads. Throws
  // std::runtime_error naming the member and the end of its log when one does not.
  explicit EtcdServer(int members = 1,
                      std::chrono::milliseconds startup = std::chrono::seconds(10));
  ~EtcdServer();
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  int members() const { return static_cast<int>(members_.size()); }
  // "127.0.0.1:<client port>" of one member; of all, comma-separated.
  std::string endpoint(int member = 0) const;
  std::string endpoints() const;
  // "etcd://<all endpoints>/<prefix>".
  std::string url(const std::string& prefix) const;
  // The member that leads now (asked of the live members), or -1 when none knows one.
  int leader() const;
  // Stops a member now (SIGKILL), as a lost host would; kill() stops them all.
  void kill(int member);
  void kill();

 private:
  struct Member {
    pid_t pid = -1;
    int clientPort = 0;
    int peerPort = 0;
    std::string log;
  };
  void waitServing(int member, std::chrono::steady_clock::time_point until);

  std::string dir_;
  std::vector<Member> members_;
};

// A TCP port on 127.0.0.1 that was free a moment ago (and, closed at once, refuses connections).
int freeLoopbackPort();

}  // namespace chorus::testing
