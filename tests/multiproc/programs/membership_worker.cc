// A rank of an elastic job, for the multi-process membership tests and the recovery measurement
// (docs/fault-tolerance.md). Started with CHORUS_RANK / CHORUS_WORLD_SIZE / CHORUS_STORE (and
// CHORUS_JOIN=1 for a replacement); its identity is CHORUS_RANK, which a replacement shares with
// the rank it replaces.
//
//   membership_worker <count> <after>
//
// Runs all-reduces of `count` int64 (every element: identity + 1) until one fails, then shrinks
// (a replacement joins instead) and runs `after` more on the new communicator, then exits 0.
// Lines on stdout (times: CLOCK_MONOTONIC in ns, comparable between processes of one host):
//   START id=I mono=T                     at entry
//   READY id=I                            after its first communicator exists
//   CHANGE id=I gen=G rank=R size=N mono=T   after shrink()/join() returned
//   FIRST id=I mono=T                     first all-reduce of the new membership completed
//   SUM id=I value=S                      each all-reduce on the new communicator
#include <chorus/chorus.hpp>

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

long long mono() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// One all-reduce; the sum of element 0, or throws.
long long allReduce(chorus::Communicator& comm, std::vector<int64_t>& buf, int id) {
  for (auto& x : buf) x = id + 1;
  comm.allReduce(std::span<int64_t>(buf)).wait();
  for (auto x : buf) {
    if (x != buf[0]) {
      std::fprintf(stderr, "id %d: all-reduce elements differ\n", id);
      std::exit(3);
    }
  }
  return buf[0];
}

}  // namespace

int main(int argc, char** argv) {
  const long long started = mono();
  if (argc != 3) {
    std::fprintf(stderr, "usage: membership_worker <count> <after>\n");
    return 2;
  }
  const size_t count = std::strtoul(argv[1], nullptr, 10);
  const int after = std::atoi(argv[2]);
  const char* rankVar = std::getenv("CHORUS_RANK");
  const int id = rankVar ? std::atoi(rankVar) : -1;
  const char* joinVar = std::getenv("CHORUS_JOIN");
  const bool joining = joinVar && std::string(joinVar) == "1";
  std::printf("START id=%d mono=%lld\n", id, started);
  std::fflush(stdout);
  std::vector<int64_t> buf(count);
  try {
    auto comm = chorus::Communicator::fromEnvOrJoin();
    if (!joining) {
      std::printf("READY id=%d\n", id);
      std::fflush(stdout);
      for (;;) {
        try {
          allReduce(*comm, buf, id);
        } catch (const chorus::Error& e) {
          std::fprintf(stderr, "id %d: %s\n", id, e.what());
          break;
        }
      }
      comm = comm->shrink();
    }
    std::printf("CHANGE id=%d gen=%llu rank=%d size=%d mono=%lld\n", id,
                static_cast<unsigned long long>(comm->generation()), comm->rank(), comm->size(),
                mono());
    std::fflush(stdout);
    for (int i = 0; i < after; ++i) {
      const long long sum = allReduce(*comm, buf, id);
      if (i == 0) std::printf("FIRST id=%d mono=%lld\n", id, mono());
      std::printf("SUM id=%d value=%lld\n", id, sum);
    }
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "id %d: %s\n", id, e.what());
    return 1;
  }
}
