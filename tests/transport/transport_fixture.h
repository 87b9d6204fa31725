// Transports of one world, as ranks on threads of the test process: created through the same
// rendezvous the communicator uses, with every peer reached over one link kind.
#pragma once

#include "transport/connect.h"

#include <chorus/error.hpp>
#include <chorus/options.hpp>
#include <chorus/store.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace chorus::transport::testing {

// `size` transports on one host whose links are all of `kind` ("tcp" or "shm"), with `base`'s
// other settings.
inline std::vector<std::unique_ptr<Transport>> connectAll(int size, const std::string& kind,
                                                          std::chrono::milliseconds timeout,
                                                          const Options& base = Options()) {
  auto store = makeHashStore();
  std::vector<std::unique_ptr<Transport>> txs(static_cast<size_t>(size));
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      Options o = base;
      o.timeout = timeout;
      o.transport = parseTransportKind(kind);
      o.hostId = "contract-host";
      try {
        txs[static_cast<size_t>(r)] = connect(*store, r, size, o, "127.0.0.1");
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) {
    if (!errors[static_cast<size_t>(r)].empty()) {
      throw Error(ErrorCode::kInternal, "rank " + std::to_string(r) +
                                            " did not connect: " + errors[static_cast<size_t>(r)]);
    }
    const char* path = txs[static_cast<size_t>(r)]->pathTo((r + 1) % size);
    if (kind != path) {
      throw Error(ErrorCode::kInternal,
                  "rank " + std::to_string(r) + " reaches its peer over " + path + ", not " + kind);
    }
  }
  return txs;
}

// Runs body(transport, rank) on one thread per rank; returns what the ranks threw, "rank r: ...".
inline std::vector<std::string> runOnRanks(std::vector<std::unique_ptr<Transport>>& txs,
                                           const std::function<void(Transport&, int)>& body) {
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (size_t r = 0; r < txs.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        body(*txs[r], static_cast<int>(r));
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

inline void expectNoErrors(const std::vector<std::string>& errors) {
  for (const auto& e : errors) ADD_FAILURE() << e;
}

}  // namespace chorus::transport::testing
