// The C++ API: typed spans, non-blocking collectives and errors as exceptions.
//   chorus-run -n 2 -- ./cpp_example
#include <chorus/chorus.hpp>

#include <cstdio>
#include <numeric>
#include <vector>

int main() {
  try {
    auto comm = chorus::Communicator::fromEnv();
    const int rank = comm->rank(), n = comm->size();

    // Two gradients reduced at once: both calls return immediately, then complete in order.
    std::vector<float> grad1(1000, static_cast<float>(rank + 1));
    std::vector<double> grad2(10, 1.0);
    chorus::Work w1 = comm->allReduce(std::span<float>(grad1), chorus::ReduceOp::kAvg);
    chorus::Work w2 = comm->allReduce(std::span<double>(grad2));
    w1.wait();
    w2.wait();

    // Everyone contributes its rank; everyone receives all of them.
    std::vector<int32_t> mine{rank}, all(static_cast<size_t>(n));
    comm->allGather(std::span<const int32_t>(mine), std::span<int32_t>(all)).wait();

    if (rank == 0) {
      std::printf("avg of rank+1 over %d ranks = %.2f, sum of ones = %.0f, sum of ranks = %d\n", n,
                  grad1[0], grad2[0], std::accumulate(all.begin(), all.end(), 0));
    }
    comm->barrier().wait();
    return 0;
  } catch (const chorus::Error& e) {
    std::fprintf(stderr, "chorus error (%s): %s\n", std::string(chorus::toString(e.code())).c_str(),
                 e.what());
    return 1;
  }
}
