#include "harness/thread_ranks.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

namespace chorus::testing {

Options testOptions(std::chrono::milliseconds timeout) {
  Options o;
  o.timeout = timeout;
  // The recorder's, authentication's, the links' and the store's settings from the environment,
  // as Options::fromEnv reads them: the tests set those variables to reach their users.
  o.trace = TraceOptions::fromEnv();
  o.auth = AuthOptions::fromEnv();
  o.tcp = TcpOptions::fromEnv();
  o.storeLimits = StoreLimits::fromEnv();
  return o;
}

std::vector<std::string> runRanks(int size, const std::function<void(Communicator&)>& body,
                                  Options options) {
  return runRanksOn(std::vector<std::string>(static_cast<size_t>(size), options.hostId), body,
                    options);
}

std::vector<std::string> runRanksOn(const std::vector<std::string>& hostIds,
                                    const std::function<void(Communicator&)>& body,
                                    Options options) {
  const int size = static_cast<int>(hostIds.size());
  auto store = makeHashStore();
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        Options mine = options;
        mine.hostId = hostIds[static_cast<size_t>(r)];
        auto comm = Communicator::create(store, r, size, mine);
        body(*comm);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

void expectRanks(int size, const std::function<void(Communicator&)>& body, Options options) {
  auto errors = runRanks(size, body, options);
  for (const auto& e : errors) ADD_FAILURE() << e;
}

void expectRanksOn(const std::vector<std::string>& hostIds,
                   const std::function<void(Communicator&)>& body, Options options) {
  auto errors = runRanksOn(hostIds, body, options);
  for (const auto& e : errors) ADD_FAILURE() << e;
}

}  // namespace chorus::testing
