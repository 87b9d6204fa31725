#include "rank_environment.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <system_error>

namespace chorus::launcher {

namespace {

// "2.5", not std::to_string's "2.500000": the shortest text that reads back as the same double.
std::string shortest(double v) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;
  return std::string(buf, end);
}

}  // namespace

std::vector<std::string> rankEnvironment(const LaunchEnvironment& launch, int rank) {
  const std::string r = std::to_string(rank);
  const std::string local = std::to_string(rank - launch.firstRank);
  const std::string size = std::to_string(launch.worldSize > 0 ? launch.worldSize : launch.ranks);
  const std::string localSize = std::to_string(launch.ranks);
  std::vector<std::string> env = {
      "CHORUS_RANK=" + r, "CHORUS_WORLD_SIZE=" + size, "CHORUS_LOCAL_RANK=" + local,
      "CHORUS_LOCAL_SIZE=" + localSize, "CHORUS_STORE=" + launch.storeUrl,
      // torch.distributed's env:// (its rendezvous on this host: right for one launcher; with
      // one per host, a torch program needs MASTER_ADDR of its own).
      "RANK=" + r, "WORLD_SIZE=" + size, "LOCAL_RANK=" + local, "LOCAL_WORLD_SIZE=" + localSize,
      "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(launch.masterPort)};
  if (launch.timeoutSeconds) {
    env.push_back("CHORUS_TIMEOUT=" + shortest(*launch.timeoutSeconds));
  }
  if (!launch.keyFile.empty()) env.push_back("CHORUS_AUTH_KEY_FILE=" + launch.keyFile);
  // Every process of the job learns that spares wait (a trainer that cannot take them says so).
  if (launch.spares > 0) env.push_back("CHORUS_SPARES=" + std::to_string(launch.spares));
  if (!launch.traceDir.empty()) {
    env.push_back("CHORUS_TRACE_DIR=" + launch.traceDir);
    env.push_back("CHORUS_TRACE_SIGNAL=USR1");
  }
  return env;
}

int pickFreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int error = errno;
    close(fd);
    throw std::system_error(error, std::generic_category(), "choosing a free port for MASTER_PORT");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace chorus::launcher
