// Setup cost of shared memory, one rank of a job on one host (chorus-run -n N shm_setup_probe):
// create the communicator, run one small all-reduce and one barrier, then report what this
// process maps of Chorus's shared memory, as one line:
//   SHM rank=R size=N create_ms=C start_ms=S end_ms=E rss_kib=A pss_kib=P vsz_kib=V
// create_ms: this rank's Communicator::fromEnv; start_ms, end_ms: wall-clock milliseconds at its
// start and end (max(end) - max(start) over the ranks: creation once the last rank is there).
// rss: pages of Chorus memfds mapped here (shared pages count in every process that maps them);
// pss: the same divided among the processes sharing each page, so the sum over the ranks is the
// host's shared memory; vsz: the size of the mappings. A last barrier keeps every mapping alive
// until all ranks have measured. Exit 0, or 1 with the error.
#include <chorus/chorus.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct ShmUse {
  long rssKiB = 0, pssKiB = 0, sizeKiB = 0;
};

// Sums the Rss, Pss and Size lines of every mapping of a Chorus memfd in /proc/self/smaps.
ShmUse chorusSharedMemory() {
  ShmUse use;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool ours = false;
  while (std::getline(smaps, line)) {
    // A mapping starts with "start-end perms offset dev inode [path]"; its fields follow.
    auto colon = line.find(':');
    bool field = colon != std::string::npos && line.find(' ') > colon;
    if (!field) {
      ours = line.find("/memfd:chorus-") != std::string::npos;
      continue;
    }
    if (!ours) continue;
    std::istringstream in(line.substr(colon + 1));
    long kib = 0;
    in >> kib;
    if (line.rfind("Rss:", 0) == 0) use.rssKiB += kib;
    if (line.rfind("Pss:", 0) == 0) use.pssKiB += kib;
    if (line.rfind("Size:", 0) == 0) use.sizeKiB += kib;
  }
  return use;
}

}  // namespace

int main() {
  try {
    auto wallMs = [] {
      return std::chrono::duration<double, std::milli>(
                 std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
    const double startMs = wallMs();
    auto t0 = std::chrono::steady_clock::now();
    auto comm = chorus::Communicator::fromEnv();
    auto t1 = std::chrono::steady_clock::now();
    const double endMs = wallMs();
    std::vector<float> v(16, 1.0f);
    comm->allReduce(std::span<float>(v)).wait();
    comm->barrier().wait();
    if (v[0] != static_cast<float>(comm->size())) {
      std::fprintf(stderr, "rank %d: all-reduce gave %g, not %d\n", comm->rank(),
                   static_cast<double>(v[0]), comm->size());
      return 1;
    }
    ShmUse use = chorusSharedMemory();
    double createMs = std::chrono::duration<double, std::milli>(t1 - t0).count();
    std::printf(
        "SHM rank=%d size=%d create_ms=%.1f start_ms=%.1f end_ms=%.1f rss_kib=%ld pss_kib=%ld "
        "vsz_kib=%ld\n",
        comm->rank(), comm->size(), createMs, startMs, endMs, use.rssKiB, use.pssKiB, use.sizeKiB);
    std::fflush(stdout);
    comm->barrier().wait();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shm_setup_probe: %s\n", e.what());
    return 1;
  }
}
