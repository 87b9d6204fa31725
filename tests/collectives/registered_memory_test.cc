// Registered memory (Communicator::allocate): every collective and dtype correct with
// registered, unregistered and mixed buffers across thread-ranks, the in-place path taken exactly
// when every buffer it reads is registered, frees refused while a call uses the buffer, and no
// descriptors or segments left over after many allocations.
#include "core/registered_memory.h"
#include "algo/in_place.h"
#include "collectives/reference.h"
#include "harness/thread_ranks.h"

#include <gtest/gtest.h>

#include <dirent.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace chorus::testing {
namespace {

enum class Mode { kUnregistered, kRegistered, kMixed };
const char* name(Mode m) {
  return m == Mode::kRegistered ? "registered" : m == Mode::kMixed ? "mixed" : "unregistered";
}
bool registersOn(Mode m, int rank) {
  return m == Mode::kRegistered || (m == Mode::kMixed && rank % 2 == 0);
}

// A buffer of `bytes`, registered or on the heap.
class Mem {
 public:
  Mem(Communicator& c, size_t bytes, bool reg) : c_(c), bytes_(bytes) {
    if (reg) {
      p_ = static_cast<uint8_t*>(c.allocate(bytes));
    } else {
      heap_.resize(bytes);
      p_ = heap_.data();
    }
  }
  Mem(const Mem&) = delete;
  Mem& operator=(const Mem&) = delete;
  ~Mem() {
    if (heap_.empty()) c_.deallocate(p_);
  }
  uint8_t* data() const { return p_; }
  void fill(const Buffer& b) { std::memcpy(p_, b.data(), b.size()); }
  Buffer copy(size_t at = 0, size_t n = SIZE_MAX) const {
    if (n == SIZE_MAX) n = bytes_ - at;
    return Buffer(p_ + at, p_ + at + n);
  }

 private:
  Communicator& c_;
  size_t bytes_;
  uint8_t* p_ = nullptr;
  Buffer heap_;
};

void same(const std::string& what, int rank, const Buffer& got, const Buffer& want) {
  if (got != want) throw std::runtime_error(what + ": rank " + std::to_string(rank) + " differs");
}

// The calls here run in place from 64 KiB (the library's threshold is larger: smaller buffers
// keep the test short).
class RegisteredMemory : public ::testing::Test {
 protected:
  void SetUp() override { algo::setInPlaceMinBytesForTesting(64 * 1024); }
  void TearDown() override { algo::setInPlaceMinBytesForTesting(0); }
};

// Elements of one rank's contribution: just above that threshold for each dtype.
constexpr size_t kCount = 70000 / 4;  // for the f32 cases
size_t countOf(DataType t) { return 70000 / sizeOf(t); }

// The four collectives with an in-place form, on `mode` buffers.
void inPlaceCollectives(Communicator& c, Mode mode, DataType t) {
  const int n = c.size(), r = c.rank();
  const bool reg = registersOn(mode, r);
  const size_t count = countOf(t);
  const size_t es = sizeOf(t), bytes = count * es;
  const std::string tag = std::string(name(mode)) + " " + std::string(toString(t));
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
    if (t != DataType::kF32 && op != ReduceOp::kSum) continue;
    std::vector<Buffer> inputs;
    for (int q = 0; q < n; ++q) inputs.push_back(makeInput(t, op, q, count));
    const Buffer want = reduceReference(t, op, inputs, count);
    Mem in(c, bytes, reg), out(c, bytes, reg);
    in.fill(inputs[static_cast<size_t>(r)]);
    c.allReduce(in.data(), out.data(), count, t, op).wait();
    same("allreduce " + tag, r, out.copy(), want);
    c.allReduce(in.data(), in.data(), count, t, op).wait();  // in place
    same("allreduce in place " + tag, r, in.copy(), want);
  }
  {  // reduce-scatter: block r of the sum of every rank's N blocks
    std::vector<Buffer> inputs;
    for (int q = 0; q < n; ++q) inputs.push_back(makeInput(t, ReduceOp::kSum, q, count * n, 1));
    const Buffer sum = reduceReference(t, ReduceOp::kSum, inputs, count * n);
    Mem in(c, bytes * n, reg), out(c, bytes, reg);
    in.fill(inputs[static_cast<size_t>(r)]);
    c.reduceScatter(in.data(), out.data(), count, t, ReduceOp::kSum).wait();
    same("reduce_scatter " + tag, r, out.copy(),
         Buffer(sum.begin() + bytes * r, sum.begin() + bytes * (r + 1)));
  }
  {  // all-gather
    Buffer want;
    for (int q = 0; q < n; ++q) {
      Buffer b = makeInput(t, ReduceOp::kSum, q, count, 2);
      want.insert(want.end(), b.begin(), b.end());
    }
    Mem in(c, bytes, reg), out(c, bytes * n, reg);
    in.fill(makeInput(t, ReduceOp::kSum, r, count, 2));
    c.allGather(in.data(), out.data(), count, t).wait();
    same("all_gather " + tag, r, out.copy(), want);
  }
  {  // broadcast from rank 1
    const Buffer want = makeInput(t, ReduceOp::kSum, 1, count, 3);
    Mem buf(c, bytes, reg);
    if (r == 1) buf.fill(want);
    c.broadcast(buf.data(), count, t, 1).wait();
    same("broadcast " + tag, r, buf.copy(), want);
  }
}

// The collectives without an in-place form take their usual path with registered buffers too.
void otherCollectives(Communicator& c, Mode mode) {
  const int n = c.size(), r = c.rank();
  const bool reg = registersOn(mode, r);
  const DataType t = DataType::kI32;
  const size_t bytes = kCount * 4;
  std::vector<Buffer> inputs;
  for (int q = 0; q < n; ++q) inputs.push_back(makeInput(t, ReduceOp::kSum, q, kCount * n, 4));
  Mem in(c, bytes * n, reg), out(c, bytes * n, reg);
  in.fill(inputs[static_cast<size_t>(r)]);
  c.reduce(in.data(), out.data(), kCount, t, ReduceOp::kSum, 0).wait();
  if (r == 0) {
    Buffer want = reduceReference(t, ReduceOp::kSum, inputs, kCount);
    same(std::string("reduce ") + name(mode), r, out.copy(0, bytes), want);
  }
  c.allToAll(in.data(), out.data(), kCount, t).wait();
  for (int q = 0; q < n; ++q) {
    const Buffer& src = inputs[static_cast<size_t>(q)];
    same(std::string("all_to_all ") + name(mode), r, out.copy(bytes * q, bytes),
         Buffer(src.begin() + bytes * r, src.begin() + bytes * (r + 1)));
  }
}

TEST_F(RegisteredMemory, EveryCollectiveAndTypeWithRegisteredUnregisteredAndMixedBuffers) {
  const int n = 3;
  for (Mode mode : {Mode::kRegistered, Mode::kUnregistered, Mode::kMixed}) {
    const uint64_t before = algo::inPlaceRunCount();
    expectRanks(n, [&](Communicator& c) {
      for (DataType t : kTypes) inPlaceCollectives(c, mode, t);
      otherCollectives(c, mode);
    });
    const uint64_t ran = algo::inPlaceRunCount() - before;
    // Per rank and dtype: 2 all-reduces (6 for f32), reduce-scatter, all-gather, broadcast.
    const uint64_t eligible = n * (std::size(kTypes) * 5 + 4);
    if (mode == Mode::kRegistered) {
      EXPECT_EQ(ran, eligible) << "every call of the registered run goes in place";
    } else {
      EXPECT_EQ(ran, 0u) << name(mode) << ": some rank's buffer is not registered";
    }
  }
}

// Registered input, heap output on every rank: the all-reduce needs both, so it falls back; an
// all-gather needs only the inputs, so it runs in place.
TEST_F(RegisteredMemory, InPlaceExactlyWhenEveryBufferReadIsRegistered) {
  const uint64_t before = algo::inPlaceRunCount();
  expectRanks(2, [](Communicator& c) {
    const size_t bytes = kCount * 4;
    void* in = c.allocate(bytes);
    std::vector<float> out(kCount * 2);
    std::fill_n(static_cast<float*>(in), kCount, 1.0f + c.rank());
    c.allReduce(in, out.data(), kCount, DataType::kF32, ReduceOp::kSum).wait();
    if (out[kCount - 1] != 3.0f) throw std::runtime_error("allreduce");
    c.allGather(in, out.data(), kCount, DataType::kF32).wait();
    if (out[0] != 1.0f || out[2 * kCount - 1] != 2.0f) throw std::runtime_error("all_gather");
    c.deallocate(in);
  });
  EXPECT_EQ(algo::inPlaceRunCount() - before, 2u);  // the two all-gathers
}

// A reduced-precision wire format belongs to the ring: registered buffers must not take the
// in-place path (which reduces at full precision), and give the same bits as heap buffers.
TEST_F(RegisteredMemory, WireFormatCallsKeepTheirFormat) {
  const uint64_t before = algo::inPlaceRunCount();
  expectRanks(3, [](Communicator& c) {
    const size_t bytes = kCount * 4;
    auto* in = static_cast<float*>(c.allocate(bytes));
    auto* out = static_cast<float*>(c.allocate(bytes));
    std::vector<float> heapIn(kCount), heapOut(kCount);
    for (size_t i = 0; i < kCount; ++i) {
      in[i] = heapIn[i] = 1.0f / static_cast<float>(1 + i % 97) + 0.001f * c.rank();
    }
    const CallOptions bf16{WireFormat::kBf16};
    c.allReduce(in, out, kCount, DataType::kF32, ReduceOp::kSum, bf16).wait();
    c.allReduce(heapIn.data(), heapOut.data(), kCount, DataType::kF32, ReduceOp::kSum, bf16).wait();
    const bool same = std::memcmp(out, heapOut.data(), bytes) == 0;
    c.deallocate(in);
    c.deallocate(out);
    if (!same) throw std::runtime_error("bf16 on registered buffers differs from the heap's");
  });
  EXPECT_EQ(algo::inPlaceRunCount() - before, 0u);
}

TEST_F(RegisteredMemory, FreeWhileACallUsesTheBufferIsAnErrorNotACrash) {
  expectRanks(2, [](Communicator& c) {
    const size_t bytes = kCount * 4;
    void* buf = c.allocate(bytes);
    if (c.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Work w = c.allReduce(buf, buf, kCount, DataType::kF32, ReduceOp::kSum);
    if (c.rank() == 0) {
      // Rank 1 has not entered yet: the call cannot have finished.
      try {
        c.deallocate(buf);
        throw std::runtime_error("freeing a buffer in use succeeded");
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kInvalidArgument ||
            std::string(e.what()).find("in use") == std::string::npos) {
          throw;
        }
      }
    }
    w.wait();
    c.deallocate(buf);  // free once the call is done
    try {
      c.deallocate(buf);
      throw std::runtime_error("a second free succeeded");
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kInvalidArgument) throw;
    }
  });
}

size_t entriesIn(const char* dir) {
  size_t n = 0;
  DIR* d = ::opendir(dir);
  if (d == nullptr) return 0;
  while (::readdir(d) != nullptr) ++n;
  ::closedir(d);
  return n;
}

TEST_F(RegisteredMemory, NoDescriptorOrSegmentLeftAfterTenThousandAllocations) {
  expectRanks(1, [](Communicator& c) {
    const size_t fds = entriesIn("/proc/self/fd"), shm = entriesIn("/dev/shm");
    const size_t live = registered::liveCount();
    for (int i = 0; i < 10000; ++i) {
      void* p = c.allocate(i % 100 == 0 ? (1 << 20) : 1 + static_cast<size_t>(i));
      static_cast<uint8_t*>(p)[0] = 1;
      c.deallocate(p);
    }
    if (entriesIn("/proc/self/fd") != fds) throw std::runtime_error("descriptors leaked");
    if (entriesIn("/dev/shm") != shm) throw std::runtime_error("/dev/shm entries leaked");
    if (registered::liveCount() != live) throw std::runtime_error("registry entries leaked");
  });
  // Used in collectives (peers map them) and freed: nothing stays either. A first run starts
  // what lives as long as the process (the trace service) before the count.
  auto cycles = [](int times) {
    return [times](Communicator& c) {
      for (int i = 0; i < times; ++i) {
        chorus::Buffer<float> b(c, kCount);
        std::fill(b.begin(), b.end(), 1.0f);
        c.allReduce(b.span()).wait();
        if (b[kCount / 2] != 2.0f) throw std::runtime_error("allreduce");
      }
    };
  };
  expectRanks(2, cycles(2));
  const size_t fds = entriesIn("/proc/self/fd");
  expectRanks(2, cycles(5));
  EXPECT_EQ(entriesIn("/proc/self/fd"), fds);
}

TEST_F(RegisteredMemory, DestroyingTheCommunicatorReportsBuffersNotFreed) {
  ::testing::internal::CaptureStderr();
  void* kept = nullptr;
  expectRanks(1, [&](Communicator& c) {
    kept = c.allocate(100);
    EXPECT_THROW(c.allocate(0), Error);
    int onStack = 0;
    EXPECT_THROW(c.deallocate(&onStack), Error);
  });
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("1 registered buffer(s) (100 bytes)"), std::string::npos) << err;
  registered::release(kept);  // the process still owns it
}

}  // namespace
}  // namespace chorus::testing
