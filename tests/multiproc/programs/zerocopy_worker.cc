// Rank program for zero_copy_mp_test: with CHORUS_TCP_ZEROCOPY_BYTES set, every rank overwrites
// its send buffer the moment each call returns, for messages around the threshold (argv[1],
// bytes), sent to the next rank while the previous one is slow to receive, and all-reduces;
// whatever a peer receives must be what was sent. Prints "ZC rank=R wrong=W calls=C", exit 0
// when nothing was wrong, 2 otherwise, 3 on an error.
#include <chorus/chorus.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

uint8_t byteOf(int from, int message, size_t i) {
  return static_cast<uint8_t>((from * 101 + message * 37 + i * 7 + (i >> 12)) & 0xff);
}

}  // namespace

int main(int argc, char** argv) {
  alarm(60);
  const size_t threshold = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 65536;
  const std::vector<size_t> sizes = {threshold - 1,     threshold,      threshold + 1,
                                     3 * threshold + 5, (1u << 20) + 3, (9u << 20) + 1};
  auto comm = chorus::Communicator::fromEnv();
  const int rank = comm->rank(), n = comm->size();
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  long wrong = 0, calls = 0;
  try {
    for (size_t m = 0; m < sizes.size(); ++m) {
      const size_t bytes = sizes[m];
      std::vector<uint8_t> out(bytes), in(bytes, 0xee);
      for (size_t i = 0; i < bytes; ++i) out[i] = byteOf(rank, static_cast<int>(m), i);
      // Even ranks send first: the odd ones receive late, so sent data waits in socket buffers.
      auto sendNow = [&] {
        comm->send(out.data(), bytes, chorus::DataType::kU8, next, chorus::Run::kBlocking).wait();
        std::memset(out.data(), 0xa5, bytes);
      };
      auto recvNow = [&] {
        comm->recv(in.data(), bytes, chorus::DataType::kU8, prev, chorus::Run::kBlocking).wait();
      };
      if (rank % 2 == 0) {
        sendNow();
        recvNow();
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        recvNow();
        sendNow();
      }
      for (size_t i = 0; i < bytes; ++i) wrong += in[i] != byteOf(prev, static_cast<int>(m), i);
      // All-reduce out of place, then scribble over the input at once.
      const size_t count = bytes / 4;
      std::vector<int32_t> a(count), b(count, -1);
      for (size_t i = 0; i < count; ++i) a[i] = static_cast<int32_t>(i % 1000) + rank;
      comm->allReduce(a.data(), b.data(), count, chorus::DataType::kI32, chorus::ReduceOp::kSum,
                      chorus::Run::kBlocking)
          .wait();
      std::memset(a.data(), 0x5a, count * 4);
      for (size_t i = 0; i < count; ++i) {
        wrong += b[i] != static_cast<int32_t>(i % 1000) * n + n * (n - 1) / 2;
      }
      calls += 2;
    }
  } catch (const chorus::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    return 3;
  }
  std::printf("ZC rank=%d wrong=%ld calls=%ld\n", rank, wrong, calls);
  return wrong == 0 ? 0 : 2;
}
