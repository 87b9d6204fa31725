// An etcd on loopback for the tests of the etcd store: one member, or a cluster of several (each
// with its own free ports), data directories under the temporary directory, killed and removed at
// the end. Tests skip, saying why, where no etcd binary is installed.
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
  // std::runtime_error naming the member and the end of its log when one does not. With tls the
  // members serve HTTPS with a certificate of a CA made for the test, and ask clients for one
  // (--client-cert-auth): caFile(), clientCert(), clientKey().
  explicit EtcdServer(int members = 1, std::chrono::milliseconds startup = std::chrono::seconds(10),
                      bool tls = false);
  ~EtcdServer();
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  int members() const { return static_cast<int>(members_.size()); }
  // "127.0.0.1:<client port>" of one member; of all, comma-separated.
  std::string endpoint(int member = 0) const;
  std::string endpoints() const;
  // "etcd://<all endpoints>/<prefix>" ("etcds://" with tls).
  std::string url(const std::string& prefix) const;
  std::string caFile() const { return dir_ + "/ca.pem"; }
  std::string clientCert() const { return dir_ + "/client.pem"; }
  std::string clientKey() const { return dir_ + "/client.key"; }
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
  void makeCertificates();

  std::string dir_;
  bool tls_ = false;
  std::vector<Member> members_;
};

// A TCP port on 127.0.0.1 that was free a moment ago (and, closed at once, refuses connections).
int freeLoopbackPort();

}  // namespace chorus::testing
