// A rank whose peers never publish their records fails at its deadline naming them.
#include "transport/connect.h"

#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace chorus::transport {
namespace {

using namespace std::chrono_literals;

std::string connectError(Store& store, int rank, int size) {
  Options options;
  options.timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  try {
    connect(store, rank, size, options, "127.0.0.1");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
    return e.what();
  }
  ADD_FAILURE() << "rank " << rank << " connected alone";
  return "";
}

TEST(ConnectTimeout, NamesTheLowerRanksAndTheJobIdNeverPublished) {
  auto store = makeHashStore();
  const std::string what = connectError(*store, 2, 4);
  EXPECT_EQ(
      what.rfind("rank 2: timed out waiting for ranks 0, 1 to publish their addresses and rank 0 "
                 "to publish the job id (",
                 0),
      0u)
      << what;
}

TEST(ConnectTimeout, OverATcpStoreNamesTheMissingRank) {
  TcpStoreServer server("127.0.0.1", 0);
  auto store = makeTcpStore("127.0.0.1", server.port(), 5s);
  const std::string job(16, 'j');
  store->set("job", Store::Bytes(job.begin(), job.end()));
  const std::string record = "127.0.0.1:1 - host";
  store->set("addr/0", Store::Bytes(record.begin(), record.end()));
  const std::string what = connectError(*store, 2, 3);
  EXPECT_NE(what.find("rank 2: timed out waiting for rank 1 to publish its address ("),
            std::string::npos)
      << what;
}

}  // namespace
}  // namespace chorus::transport
