#include "harness/etcd_server.h"

#include <chorus/error.hpp>
#include <chorus/store.hpp>

#if CHORUS_HAVE_ETCD
#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_store.h"
#endif

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
#if !CHORUS_HAVE_ETCD
  *why = "libchorus was built without the etcd store (libcurl4-openssl-dev missing)";
  return "";
#endif
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

EtcdServer::EtcdServer(int members, std::chrono::milliseconds startup, bool tls) : tls_(tls) {
  std::string why;
  const std::string exe = binary(&why);
  if (exe.empty()) throw std::runtime_error(why);
  // Not /dev/shm, although etcd's fsyncs would cost nothing there: other tests count what
  // appears in it (their shared-memory segments) while this one runs beside them.
  std::string pattern = std::filesystem::temp_directory_path().string() + "/etcd-test-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + pattern);
  dir_ = pattern;
  if (tls_) {
    try {
      makeCertificates();
    } catch (...) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      throw;
    }
  }
  members_.resize(static_cast<size_t>(members));
  std::string cluster;
  for (int i = 0; i < members; ++i) {
    Member& m = members_[static_cast<size_t>(i)];
    m.clientPort = freeLoopbackPort();
    m.peerPort = freeLoopbackPort();
    m.log = dir_ + "/m" + std::to_string(i) + ".log";
    cluster += (i > 0 ? "," : "") + std::string("m") + std::to_string(i) +
               "=http://127.0.0.1:" + std::to_string(m.peerPort);
  }
  for (int i = 0; i < members; ++i) {
    Member& m = members_[static_cast<size_t>(i)];
    const std::string client =
        std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(m.clientPort);
    const std::string peer = "http://127.0.0.1:" + std::to_string(m.peerPort);
    // Heartbeat and election in tens of milliseconds: a leader is elected, and replaced, at once.
    std::vector<std::string> args = {exe,
                                     "--name=m" + std::to_string(i),
                                     "--data-dir=" + dir_ + "/m" + std::to_string(i),
                                     "--listen-client-urls=" + client,
                                     "--advertise-client-urls=" + client,
                                     "--listen-peer-urls=" + peer,
                                     "--initial-advertise-peer-urls=" + peer,
                                     "--initial-cluster=" + cluster,
                                     "--initial-cluster-token=" + dir_,
                                     "--heartbeat-interval=10",
                                     "--election-timeout=100",
                                     "--log-level=warn"};
    if (tls_) {
      for (std::string a :
           {"--cert-file=" + dir_ + "/server.pem", "--key-file=" + dir_ + "/server.key",
            "--trusted-ca-file=" + caFile(), std::string("--client-cert-auth")}) {
        args.push_back(a);
      }
    }
    m.pid = ::fork();
    if (m.pid < 0) {
      kill();
      throw std::runtime_error("fork failed");
    }
    if (m.pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
      int fd = ::open(m.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
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
  }
  const auto until = std::chrono::steady_clock::now() + startup;
  try {
    for (int i = 0; i < members; ++i) waitServing(i, until);
  } catch (...) {
    kill();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

void EtcdServer::waitServing(int member, std::chrono::steady_clock::time_point until) {
  Member& m = members_[static_cast<size_t>(member)];
  std::string last;
  for (;;) {
#if CHORUS_HAVE_ETCD
    try {
      store::etcd::makeEtcdStore(
          {store::HostPort{"127.0.0.1", m.clientPort}}, "startup", std::chrono::milliseconds(200),
          tls_, {tls_ ? caFile() : "", tls_ ? clientCert() : "", tls_ ? clientKey() : ""});
      return;
    } catch (const Error& e) {
      last = e.what();
    }
#endif
    int status = 0;
    if (::waitpid(m.pid, &status, WNOHANG) == m.pid) {
      m.pid = -1;
      throw std::runtime_error("etcd member " + std::to_string(member) +
                               " exited at start-up: " + tail(m.log, 2000));
    }
    if (std::chrono::steady_clock::now() >= until) {
      throw std::runtime_error("etcd member " + std::to_string(member) +
                               " did not serve in time (" + last +
                               "); its log ends: " + tail(m.log, 2000));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

EtcdServer::~EtcdServer() {
  kill();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void EtcdServer::kill(int member) {
  Member& m = members_[static_cast<size_t>(member)];
  if (m.pid <= 0) return;
  ::kill(m.pid, SIGKILL);
  ::waitpid(m.pid, nullptr, 0);
  m.pid = -1;
}

void EtcdServer::kill() {
  for (int i = 0; i < members(); ++i) kill(i);
}

std::string EtcdServer::endpoint(int member) const {
  return "127.0.0.1:" + std::to_string(members_[static_cast<size_t>(member)].clientPort);
}

std::string EtcdServer::endpoints() const {
  std::string out;
  for (int i = 0; i < members(); ++i) out += (i > 0 ? "," : "") + endpoint(i);
  return out;
}

std::string EtcdServer::url(const std::string& prefix) const {
  return (tls_ ? "etcds://" : "etcd://") + endpoints() + "/" + prefix;
}

void EtcdServer::makeCertificates() {
  // A CA, a certificate for the members (127.0.0.1) and one for the clients, all signed by it
  // (EC keys: quick to make).
  const std::string d = dir_;
  std::ofstream(d + "/server.ext") << "subjectAltName=IP:127.0.0.1\n"
                                   << "extendedKeyUsage=serverAuth,clientAuth\n";
  std::ofstream(d + "/client.ext") << "extendedKeyUsage=clientAuth\n";
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
  const std::string script =
      "set -e; cd '" + d + "'; exec 2>openssl.log >&2; " + "openssl req -x509" + ec +
      "-keyout ca.key -out ca.pem -days 2 -subj /CN=chorus-test-ca; " +
      "for who in server client; do openssl req" + ec +
      "-keyout $who.key -out $who.csr -subj /CN=chorus-test-$who; " +
      "openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 " +
      "-extfile $who.ext -out $who.pem; done";
  if (std::system(script.c_str()) != 0) {
    throw std::runtime_error("making test certificates with openssl failed: " +
                             tail(d + "/openssl.log", 2000));
  }
}

int EtcdServer::leader() const {
#if CHORUS_HAVE_ETCD
  // Each live member names the leader's id and its own (uint64 in decimal text); the leader is
  // the member whose own id is the one named.
  using store::etcd::Json;
  for (int i = 0; i < members(); ++i) {
    const Member& m = members_[static_cast<size_t>(i)];
    if (m.pid <= 0) continue;
    store::etcd::EtcdClient one(
        {store::HostPort{"127.0.0.1", m.clientPort}}, tls_,
        {tls_ ? caFile() : "", tls_ ? clientCert() : "", tls_ ? clientKey() : ""});
    try {
      Json status = one.call("status", "/v3/maintenance/status", Json::object(),
                             Deadline::after(std::chrono::milliseconds(500)));
      const Json self = status.value("header", Json::object()).value("member_id", Json());
      if (!self.is_null() && self == status.value("leader", Json())) return i;
    } catch (const Error&) {
    }
  }
#endif
  return -1;
}

}  // namespace chorus::testing
