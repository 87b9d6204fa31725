#include "harness/outcomes.h"

#include <gtest/gtest.h>

#include <chrono>
#include <span>

namespace chorus::testing {

std::vector<Outcome> outcomes(int n, const std::function<void(Communicator&)>& body,
                              Options options, ProbeLater probe) {
  std::vector<Outcome> out(static_cast<size_t>(n));
  auto errors = runRanks(
      n,
      [&](Communicator& c) {
        Outcome& me = out[static_cast<size_t>(c.rank())];
        auto t0 = std::chrono::steady_clock::now();
        try {
          body(c);
        } catch (const Error& e) {
          me.code = e.code();
          me.message = e.what();
        }
        me.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (probe == ProbeLater::kNo || me.code == ErrorCode::kOk) return;
        float x = 1;
        try {
          c.allReduce(std::span<float>(&x, 1)).wait();
        } catch (const Error& e) {
          me.laterCode = e.code();
          me.laterMessage = e.what();
        }
      },
      options);
  for (auto& e : errors) ADD_FAILURE() << e;
  return out;
}

}  // namespace chorus::testing
