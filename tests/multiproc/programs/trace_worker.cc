// Rank program for tests/trace/trace_process_test.sh: 8-byte all-reduces through the C++ API.
// Prints "PID rank=R pid=P" first.
//   stall K N     every rank runs N all-reduces, except rank K, which prints "STALLED" before its
//                 N-th and then sleeps (alive, stuck) until it is stopped; the others fail with a
//                 timeout and exit 3
//   slow K N MS   rank K sleeps MS milliseconds before each of N all-reduces; exit 0
#include <chorus/chorus.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  auto arg = [&](int i) { return argc > i ? std::atoi(argv[i]) : 0; };
  const int k = arg(2), n = arg(3);
  auto comm = chorus::Communicator::fromEnv();
  std::printf("PID rank=%d pid=%d\n", comm->rank(), static_cast<int>(getpid()));
  std::fflush(stdout);
  double x = 1, y = 0;
  try {
    for (int i = 0; i < n; ++i) {
      if (mode == "stall" && comm->rank() == k && i == n - 1) {
        std::printf("STALLED rank=%d before=%d\n", k, i);
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::seconds(60));
        return 4;
      }
      if (mode == "slow" && comm->rank() == k) {
        std::this_thread::sleep_for(std::chrono::milliseconds(arg(4)));
      }
      comm->allReduce(&x, &y, 1, chorus::DataType::kF64, chorus::ReduceOp::kSum,
                      chorus::Run::kBlocking);
    }
  } catch (const chorus::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", comm->rank(), e.what());
    return 3;
  }
  return 0;
}
