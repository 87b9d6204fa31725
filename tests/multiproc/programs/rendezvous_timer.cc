// Times communicator creation (the rendezvous through the store), for bench/store/rendezvous.sh.
//   rendezvous_timer threads N URL REPS   N thread ranks, each with its own store client, REPS
//                                         times; "tcp" hosts a TCP store server per repetition,
//                                         an etcd:// URL gets a fresh prefix per repetition
//   rendezvous_timer rank                 one rank of chorus-run (CHORUS_* from the launcher)
// Prints "create_ms=<slowest rank>" per repetition (threads) or per rank (rank), after an
// all-reduce that checks the communicator works.
#include <chorus/chorus.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

void checkAllReduce(chorus::Communicator& comm) {
  std::vector<int> v(16, 1);
  comm.allReduce(std::span<int>(v)).wait();
  if (v[0] != comm.size()) throw std::runtime_error("all-reduce gave a wrong sum");
}

int threads(int n, const std::string& url, int reps) {
  for (int rep = 0; rep < reps; ++rep) {
    std::unique_ptr<chorus::TcpStoreServer> server;
    std::string repUrl = url + "-" + std::to_string(rep);
    if (url == "tcp") {
      server = std::make_unique<chorus::TcpStoreServer>("127.0.0.1", 0);
      repUrl = "tcp://127.0.0.1:" + std::to_string(server->port());
    }
    std::vector<double> took(static_cast<size_t>(n));
    std::vector<std::string> errors(static_cast<size_t>(n));
    std::vector<std::thread> ranks;
    const auto start = Clock::now();
    for (int r = 0; r < n; ++r) {
      ranks.emplace_back([&, r] {
        try {
          chorus::Options options = chorus::Options::fromEnv();
          options.timeout = std::chrono::seconds(30);
          auto comm = chorus::Communicator::create(repUrl, r, n, options);
          took[static_cast<size_t>(r)] = msSince(start);
          checkAllReduce(*comm);
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(r)] = e.what();
        }
      });
    }
    for (auto& t : ranks) t.join();
    for (int r = 0; r < n; ++r) {
      if (!errors[static_cast<size_t>(r)].empty()) {
        std::fprintf(stderr, "rank %d: %s\n", r, errors[static_cast<size_t>(r)].c_str());
        return 1;
      }
    }
    std::printf("create_ms=%.1f\n", *std::max_element(took.begin(), took.end()));
  }
  return 0;
}

int rank() {
  const auto start = Clock::now();
  auto comm = chorus::Communicator::fromEnv();
  const double took = msSince(start);
  checkAllReduce(*comm);
  std::printf("create_ms=%.1f rank=%d\n", took, comm->rank());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "threads" && argc == 5)
      return threads(std::atoi(argv[2]), argv[3], std::atoi(argv[4]));
    if (mode == "rank") return rank();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rendezvous_timer: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: rendezvous_timer threads N URL REPS | rendezvous_timer rank\n");
  return 2;
}
