// A job whose store is on IPv6 loopback: the ranks listen on ::1 and their links carry the
// collectives there, as over IPv4.
#include <chorus/communicator.hpp>
#include <chorus/store.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace chorus {
namespace {

using namespace std::chrono_literals;

TEST(Ipv6, RanksMeetOnAnIpv6StoreAndReduceOverIpv6Links) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 1009;  // prime: uneven ring segments
  TcpStoreServer server("::1", 0);
  const std::string url = "tcp://[::1]:" + std::to_string(server.port());
  std::atomic<int> exact{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      Options o;
      o.timeout = 20s;
      o.transport = TransportKind::kTcp;
      auto comm = Communicator::create(url, r, kRanks, o);
      std::vector<int32_t> v(kCount);
      for (size_t i = 0; i < kCount; ++i) v[i] = static_cast<int32_t>(i * (r + 1));
      comm->allReduce(std::span<int32_t>(v)).wait();
      bool ok = true;
      for (size_t i = 0; i < kCount; ++i) ok = ok && v[i] == static_cast<int32_t>(i * 6);
      if (ok) ++exact;
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(exact.load(), kRanks);
  // Each rank published an IPv6 address for its links.
  auto client = makeTcpStore("::1", server.port(), 5s);
  for (int r = 0; r < kRanks; ++r) {
    const auto record = client->get("chorus/1/addr/" + std::to_string(r), 1s);
    const std::string text(record.begin(), record.end());
    EXPECT_EQ(text.rfind("[::1]:", 0), 0u) << text;
  }
}

}  // namespace
}  // namespace chorus
