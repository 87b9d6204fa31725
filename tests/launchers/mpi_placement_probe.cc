// Prints where each rank of a launched job runs and how Chorus reaches its peers, for the
// launcher tests (tests/launchers/mpi_*.sh). Rank 0 prints one line per rank, in rank order:
//
//   rank=R size=N netns=<network namespace inode> local=L/M to=self,shm,tcp,tcp launcher=<name>
//
// netns tells the emulated hosts apart (they share the hostname); local and launcher are what
// Chorus read from the launcher's variables (chorus::launchInfoFromEnv); to[p] is
// Communicator::transportTo(p). The lines travel through an all-gather, so the output is one
// block whatever the launcher does with each rank's stdout.
#include <chorus/chorus.hpp>

#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <vector>

namespace {

constexpr size_t kLineBytes = 256;

std::string netnsInode() {
  struct stat st {};
  if (stat("/proc/self/ns/net", &st) != 0) return "unknown";
  return std::to_string(st.st_ino);
}

}  // namespace

int main() {
  try {
    const chorus::LaunchInfo launch = chorus::launchInfoFromEnv();
    auto comm = chorus::Communicator::fromEnv();
    std::string line = "rank=" + std::to_string(comm->rank()) +
                       " size=" + std::to_string(comm->size()) + " netns=" + netnsInode() +
                       " local=" + std::to_string(launch.localRank) + "/" +
                       std::to_string(launch.localSize) + " to=";
    for (int p = 0; p < comm->size(); ++p) line += (p ? "," : "") + comm->transportTo(p);
    line += " launcher=" + launch.launcher;
    std::array<uint8_t, kLineBytes> mine{};
    line.copy(reinterpret_cast<char*>(mine.data()), kLineBytes - 1);
    std::vector<uint8_t> all(kLineBytes * static_cast<size_t>(comm->size()));
    comm->allGather(std::span<const uint8_t>(mine), std::span<uint8_t>(all)).wait();
    if (comm->rank() == 0) {
      for (int r = 0; r < comm->size(); ++r) {
        std::printf("%s\n", reinterpret_cast<const char*>(all.data() + kLineBytes * r));
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_placement_probe: %s\n", e.what());
    return 1;
  }
}
