#include "launcher_store.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>

namespace chorus::torch_backend {
namespace {

// chorus-run serves its store before it starts any rank, so it answers at once; a CHORUS_STORE
// that does not answer within this is not worth holding up the group's creation for.
constexpr std::chrono::seconds kOpenTimeout{5};

}  // namespace

std::shared_ptr<Store> launcherStore(int rank, const AuthOptions& auth) {
  static std::mutex mu;
  static bool tried = false;
  static std::shared_ptr<Store> store;
  std::lock_guard<std::mutex> lock(mu);
  if (tried) return store;
  tried = true;
  const char* url = std::getenv("CHORUS_STORE");
  if (!url || !*url) return nullptr;
  try {
    store = openStore(url, kOpenTimeout, auth);
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "chorus backend (rank %d): cannot open CHORUS_STORE=%s for the progress records "
                 "(chorus-run --hang-seconds and chorus-doctor --live will not see this job): %s\n",
                 rank, url, e.what());
  }
  return store;
}

}  // namespace chorus::torch_backend
