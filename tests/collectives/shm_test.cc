// The shared-memory transport and the hierarchical layout, over thread-ranks: which path each
// pair takes, forced choices, ring wrap-around and single-copy messages, and no growth of file
// descriptors or memory over many collectives.
#include "collectives/reference.h"
#include "harness/memory_held.h"
#include "harness/thread_ranks.h"
#include "transport/shm/segment.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <unistd.h>

#include <barrier>
#include <mutex>
#include <stdexcept>

namespace chorus::testing {
namespace {

std::vector<std::string> hostsOf(const std::string& layout) {
  std::vector<std::string> hosts;
  for (char h : layout) hosts.push_back(std::string("host-") + h);
  return hosts;
}

// Sum all-reduce of `count` i32 with a reference check.
void checkedAllReduce(Communicator& c, size_t count, uint32_t salt = 0) {
  const int n = c.size();
  std::vector<Buffer> inputs;
  for (int r = 0; r < n; ++r)
    inputs.push_back(makeInput(DataType::kI32, ReduceOp::kSum, r, count, salt));
  Buffer want = reduceReference(DataType::kI32, ReduceOp::kSum, inputs, count);
  Buffer got = inputs[static_cast<size_t>(c.rank())];
  c.allReduce(got.data(), got.data(), count, DataType::kI32, ReduceOp::kSum).wait();
  long i = firstDifference(got.data(), want.data(), count, 4);
  if (i >= 0) {
    throw std::runtime_error("allreduce of " + std::to_string(count) + " on rank " +
                             std::to_string(c.rank()) + ": element " + std::to_string(i) +
                             " differs from the reference");
  }
}

TEST(SharedMemory, SameHostPairsUseSharedMemoryOthersTcp) {
  std::mutex mu;
  std::vector<std::string> seen(4);
  expectRanksOn(hostsOf("AABB"), [&](Communicator& c) {
    std::string paths;
    for (int p = 0; p < c.size(); ++p) paths += c.transportTo(p) + " ";
    std::lock_guard<std::mutex> lock(mu);
    seen[static_cast<size_t>(c.rank())] = paths;
  });
  EXPECT_EQ(seen[0], "self shm tcp tcp ");
  EXPECT_EQ(seen[1], "shm self tcp tcp ");
  EXPECT_EQ(seen[2], "tcp tcp self shm ");
  EXPECT_EQ(seen[3], "tcp tcp shm self ");
}

TEST(SharedMemory, ForcedTcpOnOneHost) {
  Options o = testOptions();
  o.transport = TransportKind::kTcp;
  expectRanks(
      3,
      [&](Communicator& c) {
        for (int p = 0; p < c.size(); ++p) {
          if (p != c.rank() && c.transportTo(p) != "tcp") throw std::runtime_error("not tcp");
        }
        checkedAllReduce(c, 1031);
      },
      o);
}

TEST(SharedMemory, ForcedSharedMemoryAcrossHostsIsAClearError) {
  Options o = testOptions(std::chrono::milliseconds(3000));
  o.transport = TransportKind::kShm;
  auto errors = runRanksOn(
      hostsOf("AB"), [](Communicator&) {}, o);
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& e : errors) {
    EXPECT_NE(e.find("CHORUS_TRANSPORT=shm"), std::string::npos) << e;
    EXPECT_NE(e.find("host-"), std::string::npos) << e;
  }
}

TEST(SharedMemory, HierarchicalIsChosenAcrossHostsAndRefusedOnOne) {
  expectRanksOn(hostsOf("AABB"), [](Communicator& c) {
    checkedAllReduce(c, 100000);
    if (c.lastAlgorithm() != "hier") throw std::runtime_error("chose " + c.lastAlgorithm());
    checkedAllReduce(c, 3);
  });
  Options o = testOptions();
  o.algorithm = parseAlgorithmSetting("hier");
  expectRanks(
      2,
      [](Communicator& c) {
        try {
          checkedAllReduce(c, 10);
        } catch (const Error& e) {
          if (e.code() != ErrorCode::kInvalidArgument ||
              std::string(e.what()).find("hier") == std::string::npos) {
            throw;
          }
          return;
        }
        throw std::runtime_error("CHORUS_ALGO=hier on one host was accepted");
      },
      o);
}

// From 8 MiB on, the hierarchical all-reduce runs in chunks, with the host's rings interleaved
// with the cross-host rings: check it on even layouts, contiguous and interleaved, with every op
// on awkward counts.
TEST(SharedMemory, PipelinedHierarchicalAllReduce) {
  for (const char* layout : {"AABB", "ABAB", "AAABBB"}) {
    SCOPED_TRACE(layout);
    expectRanksOn(hostsOf(layout), [](Communicator& c) {
      checkedAllReduce(c, 3000017, 7);  // 12 MB: 2 chunks
      if (c.lastAlgorithm() != "hier") throw std::runtime_error("chose " + c.lastAlgorithm());
      const size_t count = 2100011;  // f64: 16.8 MB, 4 chunks
      const int n = c.size();
      for (ReduceOp op : {ReduceOp::kAvg, ReduceOp::kMax}) {
        std::vector<Buffer> inputs;
        for (int r = 0; r < n; ++r) inputs.push_back(makeInput(DataType::kF64, op, r, count, 3));
        Buffer want = reduceReference(DataType::kF64, op, inputs, count);
        Buffer got(want.size());
        const Buffer& mine = inputs[static_cast<size_t>(c.rank())];
        c.allReduce(mine.data(), got.data(), count, DataType::kF64, op).wait();
        long i = firstDifference(got.data(), want.data(), count, 8);
        if (i >= 0) {
          throw std::runtime_error(std::string(toString(op)) + ": element " + std::to_string(i) +
                                   " differs from the reference");
        }
      }
    });
  }
}

// A ring of one page: every message larger than the ring streams through it, wrapping many
// times, with payloads that are not multiples of a cache line.
TEST(SharedMemory, TinyRingWrapsCorrectly) {
  Options o = testOptions();
  o.shmRingBytes = 4096;
  o.segmentBytes = 3000;
  expectRanks(
      3,
      [](Communicator& c) {
        for (size_t count : {size_t{1}, size_t{13}, size_t{1000}, size_t{65537}, size_t{300007}}) {
          checkedAllReduce(c, count, static_cast<uint32_t>(count));
        }
      },
      o);
}

// Mid-size messages make the writer go back to the ring's start whenever the reader has caught
// up (a marker in the slot's last word); payloads made of that very marker must still arrive
// as data.
TEST(SharedMemory, RingRewindsAndMarkerLikePayloads) {
  Options o = testOptions();
  o.shmRingBytes = 65536;
  o.segmentBytes = 20000;
  expectRanks(
      3,
      [](Communicator& c) {
        const int64_t marker = 0x444e495745524843;  // "CHREWIND"
        for (size_t count : {size_t{1}, size_t{3000}, size_t{7001}, size_t{2}, size_t{100003}}) {
          for (int rep = 0; rep < 3; ++rep) {
            std::vector<int64_t> v(count, marker);
            if (count > 1) v[count / 2] = c.rank();
            c.allReduce(std::span<int64_t>(v), ReduceOp::kMax).wait();
            for (size_t i = 0; i < count; ++i) {
              int64_t want = (count > 1 && i == count / 2) ? c.size() - 1 : marker;
              if (v[i] != want) {
                throw std::runtime_error("count " + std::to_string(count) + ": element " +
                                         std::to_string(i) + " wrong");
              }
            }
            checkedAllReduce(c, count, static_cast<uint32_t>(rep));
          }
        }
      },
      o);
}

// Messages of at least 1 byte are read straight from the sender (where the kernel allows it).
TEST(SharedMemory, SingleCopyMessages) {
  Options o = testOptions();
  o.shmSingleCopyBytes = 1;
  expectRanks(
      4,
      [](Communicator& c) {
        for (size_t count : {size_t{1}, size_t{777}, size_t{262147}}) {
          checkedAllReduce(c, count, static_cast<uint32_t>(count));
        }
        std::vector<int64_t> all(static_cast<size_t>(c.size()) * 5);
        std::vector<int64_t> mine(5, c.rank() * 10);
        c.allGather(std::span<const int64_t>(mine), std::span<int64_t>(all)).wait();
        for (size_t i = 0; i < all.size(); ++i) {
          if (all[i] != static_cast<int64_t>(i / 5) * 10) throw std::runtime_error("allgather");
        }
      },
      o);
}

long openDescriptors() {
  long n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

// 10,000 consecutive collectives on shared memory and on a hierarchical layout: the number of
// open descriptors must not change and the resident memory must stay put.
TEST(SharedMemory, NoGrowthOverTenThousandCollectives) {
  for (const char* layout : {"AA", "AABB"}) {
    SCOPED_TRACE(layout);
    std::mutex mu;
    long fdsBefore = 0, fdsAfter = 0, rssBefore = 0, rssAfter = 0;
    Options o = testOptions();
    if (std::string(layout) == "AABB")
      o.algorithm = parseAlgorithmSetting("hier");  // every all-reduce on AABB
    auto sync = [](Communicator& c) { c.barrier().wait(); };
    expectRanksOn(
        hostsOf(layout),
        [&](Communicator& c) {
          std::vector<float> v(64, 1.0f);
          for (int i = 0; i < 200; ++i) c.allReduce(std::span<float>(v)).wait();
          sync(c);
          if (c.rank() == 0) {
            std::lock_guard<std::mutex> lock(mu);
            fdsBefore = openDescriptors();
            rssBefore = test::memoryHeldBytes() / 1024;
          }
          sync(c);
          for (int i = 0; i < 10000; ++i) {
            if (i % 3 == 0) {
              c.allReduce(std::span<float>(v)).wait();
            } else if (i % 3 == 1) {
              c.broadcast(std::span<float>(v), i % c.size()).wait();
            } else {
              c.barrier().wait();
            }
          }
          sync(c);
          if (c.rank() == 0) {
            std::lock_guard<std::mutex> lock(mu);
            fdsAfter = openDescriptors();
            rssAfter = test::memoryHeldBytes() / 1024;
          }
          sync(c);
        },
        o);
    EXPECT_EQ(fdsAfter, fdsBefore);
    EXPECT_LT(rssAfter - rssBefore, 4096) << "KiB held (" << test::memoryHeldMeaning()
                                          << ") before " << rssBefore << ", after " << rssAfter;
  }
}

// Rings made (written to at least once) in the shared-memory segments of this process's ranks:
// a segment is sparse, and a ring's writer allocates its first pages before its first send, so a
// ring whose second data page is allocated has been used.
size_t ringsMade() {
  size_t made = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return 0;
  while (dirent* e = readdir(d)) {
    std::string path = std::string("/proc/self/fd/") + e->d_name;
    char target[256] = {};
    if (readlink(path.c_str(), target, sizeof(target) - 1) <= 0) continue;
    if (std::string(target).find("memfd:chorus-shm") == std::string::npos) continue;
    const int fd = std::atoi(e->d_name);
    transport::shm::SegmentIdentity h;
    if (pread(fd, &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h))) continue;
    for (uint32_t ring = 0; ring < h.rings; ++ring) {
      off_t page = static_cast<off_t>(
          transport::shm::Segment::dataOffset(ring, h.ringBytes) / 4096 * 4096 + 4096);
      if (lseek(fd, page, SEEK_DATA) == page) ++made;
    }
  }
  closedir(d);
  return made;
}

// Sends `count` i32 of value rank to rank + distance and checks what rank - distance sent.
void shiftBy(Communicator& c, int distance, size_t count) {
  const int n = c.size(), r = c.rank();
  std::vector<int32_t> out(count, r), in(count, -1);
  Work sent = c.send(std::span<const int32_t>(out), (r + distance) % n);
  c.recv(std::span<int32_t>(in), (r + n - distance) % n).wait();
  sent.wait();
  for (int32_t v : in) {
    if (v != (r + n - distance) % n) {
      throw std::runtime_error("rank " + std::to_string(r) + " got " + std::to_string(v) +
                               " from " + std::to_string((r + n - distance) % n));
    }
  }
}

// A ring's memory is allocated when its writer first sends: 8 ranks that only pass messages to
// their successor make 8 rings, not 56.
TEST(SharedMemory, RingsAreMadeOnlyForPairsThatTalk) {
  std::barrier sync(8);
  size_t rings = 0;
  expectRanks(8, [&](Communicator& c) {
    for (size_t count : {size_t{1}, size_t{1000}, size_t{300007}}) shiftBy(c, 1, count);
    sync.arrive_and_wait();
    if (c.rank() == 0) rings = ringsMade();
    sync.arrive_and_wait();
  });
  EXPECT_EQ(rings, 8u);
}

// Rings made late, while large ring all-reduces keep the neighbours' rings full: the new pairs'
// messages and the all-reduces stay correct, and every ordered pair ends with a ring.
TEST(SharedMemory, RingMadeLateUnderLoadWorks) {
  Options o = testOptions();
  o.algorithm = parseAlgorithmSetting("ring");
  std::barrier sync(6);
  size_t rings = 0;
  expectRanks(
      6,
      [&](Communicator& c) {
        checkedAllReduce(c, 500009, 1);
        for (int distance = 2; distance < c.size(); ++distance) {
          std::vector<float> ones(1 << 18, 1.0f);
          Work big = c.allReduce(std::span<float>(ones));
          shiftBy(c, distance, 70001);
          big.wait();
          if (ones.front() != 6.0f || ones.back() != 6.0f) throw std::runtime_error("all-reduce");
          checkedAllReduce(c, 300007, static_cast<uint32_t>(distance));
        }
        sync.arrive_and_wait();
        if (c.rank() == 0) rings = ringsMade();
        sync.arrive_and_wait();
      },
      o);
  EXPECT_EQ(rings, 30u);
}

}  // namespace
}  // namespace chorus::testing
