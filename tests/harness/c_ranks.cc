#include "harness/c_ranks.h"

#include <chorus/store.hpp>

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

namespace chorus::testing {

void runCRanks(int n, const std::function<void(chorus_comm*, const Fail&)>& body,
               long long timeoutMs) {
  TcpStoreServer server("127.0.0.1", 0);
  const std::string url = "tcp://127.0.0.1:" + std::to_string(server.port());
  chorus_options options{};
  options.struct_size = sizeof(options);
  options.timeout_ms = timeoutMs;
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const Fail fail = [&](const std::string& what) {
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back("rank " + std::to_string(r) + ": " + what);
      };
      chorus_comm* comm = nullptr;
      if (chorus_comm_init_with_options(url.c_str(), r, n, &options, &comm) != CHORUS_OK) {
        return fail(std::string("chorus_comm_init_with_options: ") + chorus_last_error(nullptr));
      }
      body(comm, fail);
      chorus_comm_destroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) ADD_FAILURE() << e;
}

}  // namespace chorus::testing
