// Registered memory across processes (tests/multiproc/registered_mp_test.cc), through the C API.
//   registered_worker check registered|unregistered|mixed
//     all-reduce (also in place), reduce-scatter, all-gather and broadcast of f32, i32 and bf16
//     on chorus_mem_alloc'd buffers (mixed: even ranks only), each checked; prints
//     "RESULT rank=R case=MODE status=ok wrong=W peer_segments=P": P, the peers' registered
//     segments mapped into this process (from /proc/self/maps), shows the in-place path ran.
//   registered_worker kill9
//     an all-reduce on registered buffers, "HELD rank=R", then SIGKILL to itself.
#include <chorus/chorus.h>

#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace {

void say(const std::string& line) {
  std::string s = line + "\n";
  (void)!write(STDOUT_FILENO, s.data(), s.size());
}

[[noreturn]] void fail(chorus_comm* c, const std::string& what, chorus_status st) {
  say("RESULT rank=" + std::to_string(chorus_comm_rank(c)) + " case=" + what +
      " status=" + chorus_status_string(st) + " msg=" + chorus_last_error(c));
  std::exit(1);
}

// Distinct registered segments mapped here (memfd names show in /proc/self/maps).
size_t registeredSegmentsMapped() {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> inodes;
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("chorus-registered") == std::string::npos) continue;
    // address perms offset dev inode path: the inode names the segment.
    std::vector<std::string> f;
    size_t at = 0;
    for (int k = 0; k < 5; ++k) {
      size_t sp = line.find(' ', at);
      f.push_back(line.substr(at, sp - at));
      at = sp + 1;
    }
    inodes.insert(f[4]);
  }
  return inodes.size();
}

uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);  // exact for the small integers used here
}

// Element i of rank r's contribution: a small integer, exact in every type and order.
double value(int r, size_t i) { return static_cast<double>((i * 7 + static_cast<size_t>(r)) % 5); }

void store(chorus_dtype t, uint8_t* p, double v) {
  if (t == CHORUS_DTYPE_F32) {
    float f = static_cast<float>(v);
    std::memcpy(p, &f, 4);
  } else if (t == CHORUS_DTYPE_I32) {
    int32_t x = static_cast<int32_t>(v);
    std::memcpy(p, &x, 4);
  } else {
    uint16_t b = toBf16(static_cast<float>(v));
    std::memcpy(p, &b, 2);
  }
}

size_t sizeOf(chorus_dtype t) { return t == CHORUS_DTYPE_BF16 ? 2 : 4; }

struct Mem {
  chorus_comm* c;
  uint8_t* p;
  bool reg;
  Mem(chorus_comm* comm, size_t bytes, bool registered) : c(comm), reg(registered) {
    p = static_cast<uint8_t*>(reg ? chorus_mem_alloc(c, bytes) : std::calloc(bytes, 1));
    if (p == nullptr) fail(c, "alloc", CHORUS_ERR_SYSTEM);
  }
  ~Mem() {
    if (!reg) {
      std::free(p);
      return;
    }
    chorus_status st = chorus_mem_free(c, p);
    if (st != CHORUS_OK) fail(c, "free", st);
  }
};

long checkAll(chorus_comm* c, bool reg) {
  const int n = chorus_comm_size(c), r = chorus_comm_rank(c);
  long wrong = 0;
  for (chorus_dtype t : {CHORUS_DTYPE_F32, CHORUS_DTYPE_I32, CHORUS_DTYPE_BF16}) {
    // Just above the in-place threshold (1 MiB); not a multiple of the world size.
    const size_t es = sizeOf(t), count = ((1 << 20) + 12) / es, bytes = count * es;
    std::vector<uint8_t> want(bytes * n);
    auto expectBytes = [&](const uint8_t* got, const uint8_t* exp, size_t b) {
      for (size_t i = 0; i < b; ++i) wrong += got[i] != exp[i];
    };
    {  // all-reduce, apart and in place
      Mem in(c, bytes, reg), out(c, bytes, reg);
      for (size_t i = 0; i < count; ++i) {
        store(t, in.p + i * es, value(r, i));
        double sum = 0;
        for (int q = 0; q < n; ++q) sum += value(q, i);
        store(t, want.data() + i * es, sum);
      }
      chorus_status st = chorus_all_reduce(c, in.p, out.p, count, t, CHORUS_OP_SUM);
      if (st != CHORUS_OK) fail(c, "all_reduce", st);
      expectBytes(out.p, want.data(), bytes);
      st = chorus_all_reduce(c, in.p, in.p, count, t, CHORUS_OP_SUM);
      if (st != CHORUS_OK) fail(c, "all_reduce in place", st);
      expectBytes(in.p, want.data(), bytes);
    }
    {  // reduce-scatter: every rank contributes value(q, i) over N blocks
      Mem in(c, bytes * n, reg), out(c, bytes, reg);
      for (size_t i = 0; i < count * n; ++i) store(t, in.p + i * es, value(r, i));
      for (size_t i = 0; i < count; ++i) {
        double sum = 0;
        for (int q = 0; q < n; ++q) sum += value(q, count * r + i);
        store(t, want.data() + i * es, sum);
      }
      chorus_status st = chorus_reduce_scatter(c, in.p, out.p, count, t, CHORUS_OP_SUM);
      if (st != CHORUS_OK) fail(c, "reduce_scatter", st);
      expectBytes(out.p, want.data(), bytes);
    }
    {  // all-gather
      Mem in(c, bytes, reg), out(c, bytes * n, reg);
      for (size_t i = 0; i < count; ++i) store(t, in.p + i * es, value(r, i));
      for (int q = 0; q < n; ++q) {
        for (size_t i = 0; i < count; ++i)
          store(t, want.data() + (count * q + i) * es, value(q, i));
      }
      chorus_status st = chorus_all_gather(c, in.p, out.p, count, t);
      if (st != CHORUS_OK) fail(c, "all_gather", st);
      expectBytes(out.p, want.data(), bytes * n);
    }
    {  // broadcast from the last rank
      Mem buf(c, bytes, reg);
      for (size_t i = 0; i < count; ++i) store(t, want.data() + i * es, value(n - 1, i));
      if (r == n - 1) std::memcpy(buf.p, want.data(), bytes);
      chorus_status st = chorus_broadcast(c, buf.p, count, t, n - 1);
      if (st != CHORUS_OK) fail(c, "broadcast", st);
      expectBytes(buf.p, want.data(), bytes);
    }
  }
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  chorus_comm* c = nullptr;
  if (chorus_comm_init_from_env(&c) != CHORUS_OK) {
    say(std::string("RESULT rank=-1 case=init status=failed msg=") + chorus_last_error(nullptr));
    return 1;
  }
  const int r = chorus_comm_rank(c);
  if (mode == "check" && argc > 2) {
    const std::string how = argv[2];
    const bool reg = how == "registered" || (how == "mixed" && r % 2 == 0);
    // Kept registered for the whole run, so that the peers' mappings of it can be counted.
    const size_t own = registeredSegmentsMapped();
    const long wrong = checkAll(c, reg);
    const size_t peers = registeredSegmentsMapped() - own;
    say("RESULT rank=" + std::to_string(r) + " case=" + how +
        " status=ok wrong=" + std::to_string(wrong) + " peer_segments=" + std::to_string(peers));
    chorus_comm_destroy(c);
    return wrong == 0 ? 0 : 1;
  }
  if (mode == "kill9") {
    void* p = chorus_mem_alloc(c, 1 << 20);
    if (p == nullptr) fail(c, "alloc", CHORUS_ERR_SYSTEM);
    chorus_status st = chorus_all_reduce(c, p, p, (1 << 20) / 4, CHORUS_DTYPE_F32, CHORUS_OP_SUM);
    if (st != CHORUS_OK) fail(c, "all_reduce", st);
    chorus_barrier(c);
    say("HELD rank=" + std::to_string(r) +
        " segments=" + std::to_string(registeredSegmentsMapped()));
    // Both ranks have said so before either dies: the launcher stops the others at the first
    // death, which could otherwise come before the other rank's line.
    chorus_barrier(c);
    ::raise(SIGKILL);
  }
  say("usage: registered_worker check registered|unregistered|mixed | kill9");
  return 2;
}
