// Rank program for collectives_mp_test: runs collectives through the C API as argv[1] says and
// prints one "RESULT rank=R case=C status=S [key=value ...] msg=<chorus_last_error>" line per
// checked call (msg= always comes last and runs to the end of the line).
//   correct                 every collective over many counts, dtypes and ops, in and out of
//                           place, blocking and not, checked bit for bit against a reference and
//                           across ranks; exit 0, 1 on an error status, 2 on wrong data
//   kill K [MIB] [DELAY_MS] [LINGER_MS]
//                           loop an in-place all-reduce of MIB MiB (default 16); rank K SIGKILLs
//                           itself DELAY_MS (default 300) after the loop starts; the others
//                           report how they failed and exit 1 LINGER_MS (default 1000) later
//   exit-early K [SETTLE_MS]
//                           after two good collectives and a pause of SETTLE_MS (default 300)
//                           rank K destroys its communicator and exits 0; the others run one
//                           more all-reduce and report how it failed
//   mismatch-count|-op|-dtype|-collective|-root [odd|one] [COUNT] [SETTLE_MS]
//                           after two good collectives and a pause of SETTLE_MS (default 300),
//                           rank 1 (with "odd": every odd rank) calls a different collective
//                           (of COUNT elements, default 1000); every rank reports that call
//                           and the one after it
//   invalid                 invalid calls (rank 0 makes each twice), then a valid all-reduce
//   garbage [A]             rank A (default the last) sends garbage to the other ranks' listening
//                           ports during setup and while they run collectives, and to the store
// Every rank ignores SIGTERM so that it can still report after chorus-run saw another rank fail.
#include <chorus/chorus.h>
#include <chorus/store.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

int64_t monoMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // system-wide: comparable between the ranks
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// One write per line, so lines of different ranks and threads never mix.
void say(const std::string& line) {
  std::string s = line + "\n";
  (void)!write(STDOUT_FILENO, s.data(), s.size());
}

std::string oneLine(const char* text) {
  std::string s = text ? text : "<null>";
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

struct Ctx {
  chorus_comm* comm = nullptr;
  int rank = 0;
  int size = 1;
};

void result(const Ctx& c, const std::string& caseName, chorus_status st,
            const std::string& extra = "", const char* msg = nullptr) {
  std::string line = "RESULT rank=" + std::to_string(c.rank) + " case=" + caseName +
                     " status=" + chorus_status_string(st);
  if (!extra.empty()) line += " " + extra;
  line += " msg=" + oneLine(msg ? msg : (c.comm ? chorus_last_error(c.comm) : ""));
  say(line);
}

[[noreturn]] void fatal(const std::string& what) {
  say("FATAL " + what);
  std::exit(3);
}

Ctx init() {
  Ctx c;
  chorus_status st = chorus_init_from_env(&c.comm);
  if (st != CHORUS_OK) {
    fatal(std::string("chorus_init_from_env: ") + chorus_status_string(st) + ": " +
          oneLine(chorus_last_error(nullptr)));
  }
  c.rank = chorus_rank(c.comm);
  c.size = chorus_world_size(c.comm);
  return c;
}

// ---- values ----

size_t sizeOf(chorus_dtype t) {
  switch (t) {
    case CHORUS_F16:
    case CHORUS_BF16:
      return 2;
    case CHORUS_I8:
    case CHORUS_U8:
      return 1;
    case CHORUS_F64:
    case CHORUS_I64:
      return 8;
    default:
      return 4;
  }
}

const char* dtypeName(chorus_dtype t) {
  switch (t) {
    case CHORUS_F32:
      return "f32";
    case CHORUS_I32:
      return "i32";
    case CHORUS_F16:
      return "f16";
    default:
      return "other";
  }
}

const char* opName(chorus_op op) {
  switch (op) {
    case CHORUS_SUM:
      return "sum";
    case CHORUS_MAX:
      return "max";
    case CHORUS_AVG:
      return "avg";
    case CHORUS_MIN:
      return "min";
    default:
      return "prod";
  }
}

// IEEE half of a small integer (|v| < 2048: exact).
uint16_t halfOf(int v) {
  if (v == 0) return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  unsigned a = static_cast<unsigned>(std::abs(v));
  int e = 0;
  while ((a >> (e + 1)) != 0) ++e;
  unsigned mantissa = (a << (10 - e)) & 0x3FF;
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | mantissa);
}

void store(chorus_dtype t, uint8_t* base, size_t i, int v) {
  switch (t) {
    case CHORUS_F32: {
      float f = static_cast<float>(v);
      std::memcpy(base + i * 4, &f, 4);
      return;
    }
    case CHORUS_I32: {
      int32_t x = v;
      std::memcpy(base + i * 4, &x, 4);
      return;
    }
    case CHORUS_F16: {
      uint16_t h = halfOf(v);
      std::memcpy(base + i * 2, &h, 2);
      return;
    }
    default:
      fatal("store: unsupported dtype");
  }
}

// Rank r's input element i: the offsets sum to zero over the ranks, so the sum is n * base(i) and
// the average base(i) exactly, whatever the order of the additions.
int baseOf(size_t i, int salt) { return static_cast<int>((i * 7 + salt * 5 + 3) % 13) - 6; }
int scaleOf(size_t i, int salt) { return static_cast<int>((i + salt) % 3); }
int input(int r, int n, size_t i, int salt) {
  return baseOf(i, salt) + (2 * r - (n - 1)) * scaleOf(i, salt);
}
int reduced(chorus_op op, int n, size_t i, int salt) {
  switch (op) {
    case CHORUS_SUM:
      return n * baseOf(i, salt);
    case CHORUS_MAX:
      return baseOf(i, salt) + (n - 1) * scaleOf(i, salt);
    case CHORUS_AVG:
      return baseOf(i, salt);
    default:
      fatal("reduced: unsupported op");
  }
}

std::vector<uint8_t> filled(chorus_dtype t, size_t count, int r, int n, int salt) {
  std::vector<uint8_t> v(count * sizeOf(t));
  for (size_t i = 0; i < count; ++i) store(t, v.data(), i, input(r, n, i, salt));
  return v;
}

struct Hash {
  uint64_t h = 1469598103934665603ull;
  void add(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  void add(const std::vector<uint8_t>& v) { add(v.data(), v.size()); }
};

uint8_t* ptr(std::vector<uint8_t>& v) { return v.empty() ? nullptr : v.data(); }

// ---- correct ----

// The combinations run with the large count: each dtype and op once, both placements.
bool heavyAllReduce(chorus_dtype t, chorus_op op, int inPlace) {
  return (t == CHORUS_F32 && op == CHORUS_SUM && !inPlace) ||
         (t == CHORUS_I32 && op == CHORUS_MAX && inPlace) ||
         (t == CHORUS_F16 && op == CHORUS_AVG && inPlace);
}

class Checker {
 public:
  explicit Checker(Ctx c) : c_(c) {}

  void status(const std::string& name, chorus_status st) {
    if (st != CHORUS_OK) {
      result(c_, name, st);
      std::exit(1);
    }
    ++ops_;
  }
  void same(const std::string& name, const std::vector<uint8_t>& got,
            const std::vector<uint8_t>& want, size_t offset = 0) {
    ++checks_;
    if (got.size() < offset + want.size() ||
        (!want.empty() && std::memcmp(got.data() + offset, want.data(), want.size()) != 0)) {
      size_t at = 0;
      while (at < want.size() && offset + at < got.size() && got[offset + at] == want[at]) ++at;
      say("WRONG rank=" + std::to_string(c_.rank) + " case=" + name +
          " first_bad_byte=" + std::to_string(at) + " of " + std::to_string(want.size()));
      ++wrong_;
    }
  }
  int ops() const { return ops_; }
  int checks() const { return checks_; }
  int wrong() const { return wrong_; }

 private:
  Ctx c_;
  int ops_ = 0, checks_ = 0, wrong_ = 0;
};

int runCorrect(const Ctx& c) {
  const int n = c.size, me = c.rank;
  const auto N = static_cast<size_t>(n);
  Checker k(c);
  Hash hash;  // of the results every rank gets alike
  int salt = 0;
  int64_t start = monoMs();
  const std::vector<size_t> counts = {0, 1, 7, N - 1, N + 1, 1000003};
  const chorus_dtype dtypes[] = {CHORUS_F32, CHORUS_I32, CHORUS_F16};
  const chorus_op ops[] = {CHORUS_SUM, CHORUS_MAX, CHORUS_AVG};

  k.status("barrier", chorus_barrier(c.comm));
  for (size_t count : counts) {
    const std::string cn = "count=" + std::to_string(count);
    // The large count runs a sample of the combinations: all of them would take too long.
    const bool heavy = count > 100000;
    for (chorus_dtype t : dtypes) {
      const size_t es = sizeOf(t);
      for (chorus_op op : ops) {
        for (int inPlace = 0; inPlace < 2; ++inPlace) {
          if (heavy && !heavyAllReduce(t, op, inPlace)) continue;
          const std::string name = std::string("allreduce/") + dtypeName(t) + "/" + opName(op) +
                                   (inPlace ? "/inplace/" : "/outofplace/") + cn;
          ++salt;
          auto in = filled(t, count, me, n, salt);
          const auto original = in;
          std::vector<uint8_t> want(count * es);
          for (size_t i = 0; i < count; ++i) store(t, want.data(), i, reduced(op, n, i, salt));
          if (inPlace) {
            k.status(name, chorus_allreduce(c.comm, ptr(in), ptr(in), count, t, op));
            k.same(name, in, want);
            hash.add(in);
          } else {
            std::vector<uint8_t> out(count * es, 0xAB);
            k.status(name, chorus_allreduce(c.comm, ptr(in), ptr(out), count, t, op));
            k.same(name, out, want);
            k.same(name + "/input-kept", in, original);
            hash.add(out);
          }
        }
      }
    }
    // reduce_scatter: this rank receives block `me` of the reduction of count * n elements.
    const std::pair<chorus_dtype, chorus_op> rsCases[] = {
        {CHORUS_F32, CHORUS_SUM}, {CHORUS_I32, CHORUS_MAX}, {CHORUS_F16, CHORUS_AVG}};
    for (auto [t, op] : rsCases) {
      const size_t es = sizeOf(t);
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        if (heavy && (t != CHORUS_F16 || !inPlace)) continue;
        const std::string name = std::string("reduce_scatter/") + dtypeName(t) + "/" + opName(op) +
                                 (inPlace ? "/inplace/" : "/outofplace/") + cn;
        ++salt;
        auto in = filled(t, count * N, me, n, salt);
        std::vector<uint8_t> want(count * es);
        for (size_t i = 0; i < count; ++i) {
          store(t, want.data(), i, reduced(op, n, count * static_cast<size_t>(me) + i, salt));
        }
        if (inPlace) {
          uint8_t* recv = count ? in.data() + count * es * static_cast<size_t>(me) : nullptr;
          k.status(name, chorus_reduce_scatter(c.comm, ptr(in), recv, count, t, op));
          k.same(name, in, want, count * es * static_cast<size_t>(me));
        } else {
          const auto original = in;
          std::vector<uint8_t> out(count * es, 0xAB);
          k.status(name, chorus_reduce_scatter(c.comm, ptr(in), ptr(out), count, t, op));
          k.same(name, out, want);
          k.same(name + "/input-kept", in, original);
        }
      }
    }
    // all_gather: block r of the output comes from rank r.
    for (chorus_dtype t : {CHORUS_F32, CHORUS_F16}) {
      const size_t es = sizeOf(t);
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        if (heavy && (t != CHORUS_F32 || !inPlace)) continue;
        const std::string name = std::string("all_gather/") + dtypeName(t) +
                                 (inPlace ? "/inplace/" : "/outofplace/") + cn;
        ++salt;
        std::vector<uint8_t> want(count * N * es);
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) {
            store(t, want.data(), count * static_cast<size_t>(r) + i, input(r, n, i, salt));
          }
        }
        std::vector<uint8_t> out(count * N * es, 0xAB);
        if (inPlace) {
          uint8_t* mine = count ? out.data() + count * es * static_cast<size_t>(me) : nullptr;
          for (size_t i = 0; i < count; ++i) store(t, mine, i, input(me, n, i, salt));
          k.status(name, chorus_all_gather(c.comm, mine, ptr(out), count, t));
        } else {
          auto in = filled(t, count, me, n, salt);
          const auto original = in;
          k.status(name, chorus_all_gather(c.comm, ptr(in), ptr(out), count, t));
          k.same(name + "/input-kept", in, original);
        }
        k.same(name, out, want);
        hash.add(out);
      }
    }
    // broadcast from every root.
    for (int root = 0; root < n; ++root) {
      if (heavy && root != 0 && root != n - 1) continue;
      chorus_dtype t = root % 2 ? CHORUS_I32 : CHORUS_F32;
      const std::string name =
          std::string("broadcast/") + dtypeName(t) + "/root=" + std::to_string(root) + "/" + cn;
      ++salt;
      auto want = filled(t, count, root, n, salt);
      std::vector<uint8_t> buf = me == root ? want : std::vector<uint8_t>(want.size(), 0xAB);
      k.status(name, chorus_broadcast(c.comm, ptr(buf), count, t, root));
      k.same(name, buf, want);
      hash.add(buf);
    }
    k.status("barrier/" + cn, chorus_barrier(c.comm));
  }

  // Non-blocking: several requests in flight, completed in issue order.
  for (size_t count : {size_t{7}, size_t{300007}}) {
    const std::string cn = "/count=" + std::to_string(count);
    int s0 = ++salt, s1 = ++salt, s2 = ++salt, s3 = ++salt, s4 = ++salt;
    auto a = filled(CHORUS_F32, count, me, n, s0);
    std::vector<uint8_t> aOut(count * 4, 0xAB);
    auto b = filled(CHORUS_I32, count, me, n, s1);
    auto rs = filled(CHORUS_F32, count * N, me, n, s2);
    std::vector<uint8_t> rsOut(count * 4, 0xAB);
    auto ag = filled(CHORUS_I32, count, me, n, s3);
    std::vector<uint8_t> agOut(count * N * 4, 0xAB);
    const int root = n - 1;
    auto bcWant = filled(CHORUS_F32, count, root, n, s4);
    std::vector<uint8_t> bc = me == root ? bcWant : std::vector<uint8_t>(bcWant.size(), 0xAB);

    chorus_request* req[5] = {};
    k.status("iallreduce" + cn,
             chorus_iallreduce(c.comm, ptr(a), ptr(aOut), count, CHORUS_F32, CHORUS_SUM, &req[0]));
    k.status("iallreduce/inplace" + cn,
             chorus_iallreduce(c.comm, ptr(b), ptr(b), count, CHORUS_I32, CHORUS_MAX, &req[1]));
    k.status("ireduce_scatter" + cn, chorus_ireduce_scatter(c.comm, ptr(rs), ptr(rsOut), count,
                                                            CHORUS_F32, CHORUS_SUM, &req[2]));
    k.status("iall_gather" + cn,
             chorus_iall_gather(c.comm, ptr(ag), ptr(agOut), count, CHORUS_I32, &req[3]));
    k.status("ibroadcast" + cn,
             chorus_ibroadcast(c.comm, ptr(bc), count, CHORUS_F32, root, &req[4]));
    int done = 0;
    int64_t deadline = monoMs() + 20000;
    while (!done) {
      chorus_status polled = chorus_test(req[4], &done);
      if (polled != CHORUS_OK) k.status("test" + cn, polled);
      if (!done && monoMs() > deadline) fatal("chorus_test never reported completion" + cn);
      if (!done) usleep(1000);
    }
    for (int i = 0; i < 4; ++i) {  // issue order: the earlier ones are complete too
      int earlier = 0;
      k.status("test" + cn, chorus_test(req[i], &earlier));
      if (!earlier) {
        say("WRONG rank=" + std::to_string(me) + " case=test-order" + cn +
            " request=" + std::to_string(i));
        fatal("requests completed out of issue order");
      }
    }
    for (int i = 0; i < 5; ++i) k.status("wait" + cn, chorus_wait(req[i]));

    std::vector<uint8_t> want(count * 4);
    for (size_t i = 0; i < count; ++i) store(CHORUS_F32, want.data(), i, n * baseOf(i, s0));
    k.same("iallreduce" + cn, aOut, want);
    for (size_t i = 0; i < count; ++i) {
      store(CHORUS_I32, want.data(), i, reduced(CHORUS_MAX, n, i, s1));
    }
    k.same("iallreduce/inplace" + cn, b, want);
    for (size_t i = 0; i < count; ++i) {
      store(CHORUS_F32, want.data(), i,
            reduced(CHORUS_SUM, n, count * static_cast<size_t>(me) + i, s2));
    }
    k.same("ireduce_scatter" + cn, rsOut, want);
    std::vector<uint8_t> agWant(count * N * 4);
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) {
        store(CHORUS_I32, agWant.data(), count * static_cast<size_t>(r) + i, input(r, n, i, s3));
      }
    }
    k.same("iall_gather" + cn, agOut, agWant);
    k.same("ibroadcast" + cn, bc, bcWant);
    hash.add(aOut);
    hash.add(b);
    hash.add(agOut);
    hash.add(bc);
  }

  // Every rank must hold bit-identical results: compare the hashes.
  std::vector<uint64_t> hashes(N);
  k.status("all_gather/hash", chorus_all_gather(c.comm, &hash.h, hashes.data(), 8, CHORUS_U8));
  bool identical = true;
  for (uint64_t h : hashes) identical = identical && h == hash.h;
  k.status("barrier/end", chorus_barrier(c.comm));

  char hex[32];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash.h));
  result(c, "correct", CHORUS_OK,
         "ops=" + std::to_string(k.ops()) + " checks=" + std::to_string(k.checks()) +
             " wrong=" + std::to_string(k.wrong()) + " identical=" + (identical ? "1" : "0") +
             " hash=" + hex + " elapsed_ms=" + std::to_string(monoMs() - start));
  chorus_destroy(c.comm);
  return k.wrong() == 0 && identical ? 0 : 2;
}

// ---- failures ----

// Reports the call after a failure (it must be refused with the original cause) and how long
// chorus_destroy takes. Returns the exit code for `first`.
int finishAfterFailure(Ctx& c, chorus_status first, int lingerMs = 0) {
  float x = 1;
  chorus_status next = chorus_allreduce(c.comm, &x, &x, 1, CHORUS_F32, CHORUS_SUM);
  result(c, "next", next);
  int64_t t0 = monoMs();
  chorus_destroy(c.comm);
  c.comm = nullptr;
  result(c, "destroy", CHORUS_OK, "destroy_ms=" + std::to_string(monoMs() - t0), "");
  std::this_thread::sleep_for(std::chrono::milliseconds(lingerMs));
  return first == CHORUS_OK ? 0 : 1;
}

// op: allreduce, or one of reduce (to rank 0), all_to_all, all_gather_v (equal counts).
int runKill(Ctx& c, int victim, int mib, int delayMs, int lingerMs, const std::string& op) {
  const size_t count = static_cast<size_t>(mib) * (1u << 20) / 4;
  const int n = chorus_world_size(c.comm);
  const size_t block = count / static_cast<size_t>(n);
  const std::vector<size_t> counts(static_cast<size_t>(n), block);
  std::vector<float> buf(count), out(count);
  for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((i + c.rank) % 17);
  chorus_status st = chorus_barrier(c.comm);
  if (st != CHORUS_OK) {
    result(c, "barrier", st);
    return 1;
  }
  if (c.rank == victim) {
    std::thread([victim, delayMs] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
      say("KILL rank=" + std::to_string(victim) + " mono_ms=" + std::to_string(monoMs()));
      raise(SIGKILL);
    }).detach();
  }
  int iter = 0;
  int64_t callStart = 0, end = 0;
  for (; iter < 1000; ++iter) {
    callStart = monoMs();
    if (op == "reduce") {
      st = chorus_reduce(c.comm, buf.data(), out.data(), count, CHORUS_F32, CHORUS_MAX, 0);
    } else if (op == "all_to_all") {
      st = chorus_all_to_all(c.comm, buf.data(), out.data(), block, CHORUS_F32);
    } else if (op == "all_gather_v") {
      st = chorus_all_gather_v(c.comm, buf.data(), out.data(), counts.data(), CHORUS_F32);
    } else {
      st = chorus_allreduce(c.comm, buf.data(), buf.data(), count, CHORUS_F32, CHORUS_MAX);
    }
    end = monoMs();
    if (st != CHORUS_OK) break;
  }
  result(c, "first", st,
         "iter=" + std::to_string(iter) + " call_ms=" + std::to_string(end - callStart) +
             " detect_mono_ms=" + std::to_string(end));
  // chorus-run reports the first rank it sees fail: let it see the killed one first.
  return finishAfterFailure(c, st, lingerMs);
}

int runExitEarly(Ctx& c, int leaver, int settleMs) {
  const size_t count = 1 << 20;
  std::vector<float> buf(count, 1.0f);
  for (int i = 0; i < 2; ++i) {
    chorus_status st =
        chorus_allreduce(c.comm, buf.data(), buf.data(), count, CHORUS_F32, CHORUS_MAX);
    if (st != CHORUS_OK) {
      result(c, "warmup", st);
      return 1;
    }
  }
  if (c.rank == leaver) {
    // Let the others finish the second all-reduce first: see runMismatch.
    std::this_thread::sleep_for(std::chrono::milliseconds(settleMs));
    int64_t t0 = monoMs();
    chorus_destroy(c.comm);
    c.comm = nullptr;
    result(c, "leave", CHORUS_OK,
           "destroy_ms=" + std::to_string(monoMs() - t0) + " left_mono_ms=" + std::to_string(t0),
           "");
    return 0;
  }
  int64_t t0 = monoMs();
  chorus_status st =
      chorus_allreduce(c.comm, buf.data(), buf.data(), count, CHORUS_F32, CHORUS_MAX);
  int64_t end = monoMs();
  result(c, "first", st,
         "call_ms=" + std::to_string(end - t0) + " detect_mono_ms=" + std::to_string(end));
  return finishAfterFailure(c, st);
}

int runMismatch(Ctx& c, const std::string& kind, bool allOdd, size_t count, int settleMs) {
  const bool differs = allOdd ? c.rank % 2 == 1 : c.rank == 1;
  std::vector<float> buf(count + 1, 1.0f);
  // Two good calls first, so the mismatch is not at sequence number 0.
  chorus_status st = chorus_barrier(c.comm);
  if (st == CHORUS_OK) {
    st = chorus_allreduce(c.comm, buf.data(), buf.data(), count, CHORUS_F32, CHORUS_MAX);
  }
  if (st != CHORUS_OK) {
    result(c, "warmup", st);
    return 1;
  }
  // Ranks leave a collective at different times. A rank that detects the mismatch aborts at
  // once, and its abort message fails a peer still finishing the previous (good) collective: let
  // every rank finish it first (SETTLE_MS 0 shows that race).
  std::this_thread::sleep_for(std::chrono::milliseconds(settleMs));
  void* b = buf.data();
  if (kind == "count") {
    st = chorus_allreduce(c.comm, b, b, differs ? count + 1 : count, CHORUS_F32, CHORUS_SUM);
  } else if (kind == "op") {
    st = chorus_allreduce(c.comm, b, b, count, CHORUS_F32, differs ? CHORUS_MAX : CHORUS_SUM);
  } else if (kind == "dtype") {
    st = chorus_allreduce(c.comm, b, b, count, differs ? CHORUS_I32 : CHORUS_F32, CHORUS_MAX);
  } else if (kind == "collective") {
    st = differs ? chorus_broadcast(c.comm, b, count, CHORUS_F32, 0)
                 : chorus_allreduce(c.comm, b, b, count, CHORUS_F32, CHORUS_SUM);
  } else if (kind == "root") {
    st = chorus_broadcast(c.comm, b, count, CHORUS_F32, differs ? 1 : 0);
  } else {
    fatal("unknown mismatch kind '" + kind + "'");
  }
  result(c, "first", st, differs ? "differs=1" : "differs=0");
  return finishAfterFailure(c, st);
}

// ---- invalid ----

int runInvalid(Ctx& c) {
  const int n = c.size;
  const size_t N = static_cast<size_t>(n);
  std::vector<float> a(64 * N + 64, 1.0f), b(64 * N + 64, 0.0f);
  const auto badType = static_cast<chorus_dtype>(99);
  const auto badOp = static_cast<chorus_op>(99);
  bool allGood = true;
  auto expect = [&](const std::string& name, chorus_status st, const char* msg = nullptr) {
    result(c, name, st, "", msg);
    if (st != CHORUS_ERR_INVALID_ARGUMENT) allGood = false;
  };
  // Rank 0 makes every invalid call twice: one that started anything (took a sequence number,
  // sent a frame) would put the ranks out of step and fail the valid call at the end.
  for (int round = 0; round < (c.rank == 0 ? 2 : 1); ++round) {
    expect("allreduce-null-send",
           chorus_allreduce(c.comm, nullptr, b.data(), 10, CHORUS_F32, CHORUS_SUM));
    expect("allreduce-null-recv",
           chorus_allreduce(c.comm, a.data(), nullptr, 10, CHORUS_F32, CHORUS_SUM));
    expect("allreduce-bad-dtype",
           chorus_allreduce(c.comm, a.data(), b.data(), 10, badType, CHORUS_SUM));
    expect("allreduce-bad-op", chorus_allreduce(c.comm, a.data(), b.data(), 10, CHORUS_F32, badOp));
    expect("allreduce-overlap",
           chorus_allreduce(c.comm, a.data(), a.data() + 1, 10, CHORUS_F32, CHORUS_SUM));
    expect("allreduce-count-too-large",
           chorus_allreduce(c.comm, a.data(), b.data(), SIZE_MAX, CHORUS_F32, CHORUS_SUM));
    expect("reduce_scatter-bad-op", chorus_reduce_scatter(c.comm, a.data(), b.data(), 4, CHORUS_F32,
                                                          static_cast<chorus_op>(-1)));
    expect("reduce_scatter-null-recv",
           chorus_reduce_scatter(c.comm, a.data(), nullptr, 4, CHORUS_F32, CHORUS_SUM));
    expect("reduce_scatter-overlap",
           chorus_reduce_scatter(c.comm, a.data(), a.data() + 4 * c.rank + 1, 4, CHORUS_F32,
                                 CHORUS_SUM));
    expect("all_gather-bad-dtype", chorus_all_gather(c.comm, a.data(), b.data(), 4, badType));
    expect("all_gather-overlap",
           chorus_all_gather(c.comm, b.data() + 4 * c.rank + 1, b.data(), 4, CHORUS_F32));
    expect("broadcast-null-buf", chorus_broadcast(c.comm, nullptr, 4, CHORUS_F32, 0));
    expect("broadcast-root-negative", chorus_broadcast(c.comm, a.data(), 4, CHORUS_F32, -1));
    expect("broadcast-root-too-large", chorus_broadcast(c.comm, a.data(), 4, CHORUS_F32, n));
    expect("broadcast-bad-dtype", chorus_broadcast(c.comm, a.data(), 4, badType, 0));
    chorus_request* req = reinterpret_cast<chorus_request*>(&a);  // must be reset to NULL
    expect("iallreduce-bad-op",
           chorus_iallreduce(c.comm, a.data(), b.data(), 10, CHORUS_F32, badOp, &req));
    if (req != nullptr) {
      say("WRONG rank=" + std::to_string(c.rank) + " case=iallreduce-bad-op request not NULL");
      allGood = false;
    }
    expect("iallreduce-null-request",
           chorus_iallreduce(c.comm, a.data(), b.data(), 10, CHORUS_F32, CHORUS_SUM, nullptr));
    expect("ibroadcast-root-too-large",
           chorus_ibroadcast(c.comm, a.data(), 4, CHORUS_F32, n + 5, &req));
    // No communicator: the message can only come from chorus_last_error(NULL).
    expect("null-comm", chorus_allreduce(nullptr, a.data(), b.data(), 10, CHORUS_F32, CHORUS_SUM),
           chorus_last_error(nullptr));
    expect("wait-null", chorus_wait(nullptr), "");
    int done = 0;
    expect("test-null", chorus_test(nullptr, &done), "");
  }
  // Nothing was started: a valid call still works on every rank.
  for (size_t i = 0; i < 100; ++i) a[i] = static_cast<float>(c.rank + 1);
  chorus_status st = chorus_allreduce(c.comm, a.data(), b.data(), 100, CHORUS_F32, CHORUS_SUM);
  bool right = true;
  for (size_t i = 0; i < 100 && st == CHORUS_OK; ++i) {
    right = right && b[i] == static_cast<float>(n * (n + 1) / 2);
  }
  result(c, "valid", st, right ? "right=1" : "right=0");
  if (st != CHORUS_OK || !right) allGood = false;
  chorus_destroy(c.comm);
  return allGood ? 0 : 1;
}

// ---- garbage ----

struct Address {
  std::string ip;
  int port = 0;
};

// The store holds "ip:port host-id" per rank.
Address parseAddress(const std::string& record) {
  const std::string text = record.substr(0, record.find(' '));
  auto colon = text.rfind(':');
  if (colon == std::string::npos) fatal("bad address '" + text + "'");
  return Address{text.substr(0, colon), std::atoi(text.c_str() + colon + 1)};
}

int dialRaw(const Address& a) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(a.port));
  inet_pton(AF_INET, a.ip.c_str(), &sa.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void put32(std::vector<uint8_t>& v, size_t at, uint32_t x) {
  for (int i = 0; i < 4; ++i) v[at + static_cast<size_t>(i)] = static_cast<uint8_t>(x >> (8 * i));
}

// A Chorus hello (tcp/hello.h layout) that some field makes unacceptable.
std::vector<uint8_t> hello(uint32_t magic, uint8_t version, uint8_t kind,
                           const std::vector<uint8_t>& job, int32_t from, int32_t to,
                           int32_t world) {
  std::vector<uint8_t> h(72, 0);
  put32(h, 0, magic);
  h[4] = version;
  h[5] = kind;
  for (size_t i = 0; i < 16 && i < job.size(); ++i) h[8 + i] = job[i];
  put32(h, 24, static_cast<uint32_t>(from));
  put32(h, 28, static_cast<uint32_t>(to));
  put32(h, 32, static_cast<uint32_t>(world));
  return h;
}

struct Payload {
  std::string name;
  std::vector<uint8_t> bytes;
  int holdMs = 0;      // keep the connection open this long after writing
  bool reset = false;  // close with RST instead of FIN
};

std::vector<uint8_t> randomBytes(std::mt19937& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(rng());
  return v;
}

std::vector<Payload> rankPayloads(const std::vector<uint8_t>& job, int target, int n,
                                  std::mt19937& rng) {
  constexpr uint32_t kHello = 0x48524843;  // "CHRH"
  constexpr uint32_t kFrame = 0x53524843;  // "CHRS"
  std::vector<uint8_t> otherJob(16, 0x5A);
  std::vector<Payload> p;
  p.push_back({"nothing", {}, 0, false});
  p.push_back({"reset", {}, 0, true});
  p.push_back({"random-4k", randomBytes(rng, 4096), 0, false});
  p.push_back({"random-1m", randomBytes(rng, 1 << 20), 0, false});
  p.push_back({"wrong-magic", hello(0xDEADBEEF, 1, 1, job, n - 1, target, n), 0, false});
  auto truncated = hello(kHello, 1, 1, otherJob, n - 1, target, n);
  truncated.resize(20);
  p.push_back({"truncated-hello", truncated, 0, false});
  p.push_back({"truncated-hello-held", truncated, 100, false});
  p.push_back({"wrong-version", hello(kHello, 9, 1, job, n - 1, target, n), 0, false});
  p.push_back({"wrong-kind", hello(kHello, 1, 7, job, n - 1, target, n), 0, false});
  p.push_back({"accept-kind", hello(kHello, 1, 2, job, n - 1, target, n), 0, false});
  p.push_back({"other-job", hello(kHello, 1, 1, otherJob, n - 1, target, n), 0, false});
  // This job's id, but a sender that cannot be a higher rank or a wrong destination / size.
  p.push_back({"from-lower", hello(kHello, 1, 1, job, target, target, n), 0, false});
  p.push_back({"from-outside", hello(kHello, 1, 1, job, n + 7, target, n), 0, false});
  p.push_back({"from-negative", hello(kHello, 1, 1, job, -5, target, n), 0, false});
  p.push_back({"to-other", hello(kHello, 1, 1, job, n - 1, target + 1, n), 0, false});
  p.push_back({"wrong-world", hello(kHello, 1, 1, job, n - 1, target, n + 1), 0, false});
  auto hugeAuth = hello(kHello, 1, 1, otherJob, n - 1, target, n);
  put32(hugeAuth, 36, 0xFFFFFFFF);
  p.push_back({"huge-auth-length", hugeAuth, 0, false});
  // A data frame header with an absurd payload length.
  std::vector<uint8_t> frame(48, 0);
  put32(frame, 0, kFrame);
  frame[4] = 1;
  frame[5] = 1;
  for (int i = 40; i < 48; ++i) frame[static_cast<size_t>(i)] = 0xFF;
  p.push_back({"frame-huge-length", frame, 0, false});
  return p;
}

std::vector<Payload> storePayloads(std::mt19937& rng) {
  // Store frames: u32 magic "CHST" | u16 version 1 | u8 op | u8 flags | u32 body length.
  auto header = [](uint32_t magic, uint16_t version, uint8_t op, uint8_t flags, uint32_t len) {
    std::vector<uint8_t> h(12, 0);
    put32(h, 0, magic);
    h[4] = static_cast<uint8_t>(version);
    h[5] = static_cast<uint8_t>(version >> 8);
    h[6] = op;
    h[7] = flags;
    put32(h, 8, len);
    return h;
  };
  constexpr uint32_t kStore = 0x54534843;
  std::vector<Payload> p;
  p.push_back({"store-nothing", {}, 0, false});
  p.push_back({"store-reset", {}, 0, true});
  p.push_back({"store-random-4k", randomBytes(rng, 4096), 0, false});
  p.push_back({"store-random-1m", randomBytes(rng, 1 << 20), 0, false});
  p.push_back({"store-wrong-magic", header(0xDEADBEEF, 1, 1, 0, 0), 0, false});
  p.push_back({"store-wrong-version", header(kStore, 7, 1, 0, 0), 0, false});
  p.push_back({"store-bad-op", header(kStore, 1, 99, 0, 0), 0, false});
  p.push_back({"store-flags", header(kStore, 1, 1, 1, 0), 0, false});
  p.push_back({"store-huge-length", header(kStore, 1, 1, 0, 0xFFFFFFFF), 0, false});
  p.push_back({"store-max-length-truncated", header(kStore, 1, 1, 0, 64u << 20), 0, false});
  auto badBody = header(kStore, 1, 1, 0, 8);  // SET whose key length runs past the body
  for (int i = 0; i < 8; ++i) badBody.push_back(0xEE);
  p.push_back({"store-bad-body", badBody, 0, false});
  auto hugeKey = header(kStore, 1, 4, 0, 8);  // CHECK of 0xFFFFFFFF keys
  for (int i = 0; i < 4; ++i) hugeKey.push_back(0xFF);
  for (int i = 0; i < 4; ++i) hugeKey.push_back(0);
  p.push_back({"store-check-many-keys", hugeKey, 0, false});
  auto truncated = header(kStore, 1, 1, 0, 0);
  truncated.resize(7);
  p.push_back({"store-truncated-header", truncated, 100, false});
  return p;
}

// Sends every payload on a connection of its own; returns how many connections were made.
int attack(const Address& a, const std::vector<Payload>& payloads) {
  int made = 0;
  for (const auto& p : payloads) {
    int fd = dialRaw(a);
    if (fd < 0) continue;  // the port may be closed already: that is fine
    ++made;
    size_t off = 0;
    while (off < p.bytes.size()) {
      ssize_t k = ::send(fd, p.bytes.data() + off, p.bytes.size() - off, MSG_NOSIGNAL);
      if (k <= 0) break;  // the rank dropped us: that is the point
      off += static_cast<size_t>(k);
    }
    if (p.holdMs) std::this_thread::sleep_for(std::chrono::milliseconds(p.holdMs));
    if (p.reset) {
      linger l{1, 0};
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    ::close(fd);
  }
  return made;
}

int runGarbage(int attacker) {
  const char* url = std::getenv("CHORUS_STORE");
  const char* rankText = std::getenv("CHORUS_RANK");
  const char* sizeText = std::getenv("CHORUS_WORLD_SIZE");
  if (!url || !rankText || !sizeText) fatal("garbage needs CHORUS_STORE, CHORUS_RANK, ...");
  const int rank = std::atoi(rankText), n = std::atoi(sizeText);
  if (attacker < 0) attacker = n - 1;
  const std::string storeUrl = url;
  if (storeUrl.rfind("tcp://", 0) != 0) fatal("garbage needs a tcp:// store");
  const Address storeAddress = parseAddress(storeUrl.substr(6));
  std::mt19937 rng(12345u + static_cast<unsigned>(rank));
  std::vector<Address> peers;
  std::vector<uint8_t> job;
  int connections = 0;

  std::thread setupAttack;
  if (rank == attacker) {
    // The ranks publish their listening addresses once every rank has joined the store (this one
    // too, from init() below): read them as soon as they appear and attack while the ranks
    // connect, the others still waiting for this one's connection.
    setupAttack = std::thread([&] {
      auto store = chorus::openStore(storeUrl, std::chrono::seconds(10));
      for (int r = 0; r < n; ++r) {
        if (r == rank) continue;
        auto v = store->get("chorus/1/addr/" + std::to_string(r), std::chrono::seconds(10));
        peers.push_back(parseAddress(std::string(v.begin(), v.end())));
      }
      job = store->get("chorus/1/job", std::chrono::seconds(10));
      for (int r = 0, i = 0; r < n; ++r) {
        if (r != rank)
          connections += attack(peers[static_cast<size_t>(i++)], rankPayloads(job, r, n, rng));
      }
    });
  }

  Ctx c = init();
  if (setupAttack.joinable()) setupAttack.join();
  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0};
  std::thread during;
  if (rank == attacker) {
    during = std::thread([&] {
      std::mt19937 rng2(777);
      for (; !stop.load(); ++rounds) {
        for (int r = 0, i = 0; r < n; ++r) {
          if (r != rank) {
            connections += attack(peers[static_cast<size_t>(i++)], rankPayloads(job, r, n, rng2));
          }
        }
        connections += attack(storeAddress, storePayloads(rng2));
      }
    });
  }
  // Collectives while the garbage flows, until the attacker has sent every payload to every
  // rank and the store once (it tells the others through the broadcast).
  bool ok = true;
  const size_t count = 1 << 16;
  std::vector<float> buf(count);
  chorus_status st = CHORUS_OK;
  int iterations = 0;
  for (int32_t go = 1; st == CHORUS_OK && go; ++iterations) {
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(c.rank + 1);
    st = chorus_allreduce(c.comm, buf.data(), buf.data(), count, CHORUS_F32, CHORUS_SUM);
    for (size_t i = 0; i < count && st == CHORUS_OK; i += 97) {
      ok = ok && buf[i] == static_cast<float>(n * (n + 1) / 2);
    }
    if (rank == attacker) go = (rounds.load() < 1 || iterations < 20) && iterations < 100000;
    if (st == CHORUS_OK) st = chorus_broadcast(c.comm, &go, 1, CHORUS_I32, attacker);
  }
  result(c, "collectives", st,
         "iterations=" + std::to_string(iterations) + (ok ? " right=1" : " right=0"));
  if (rank == attacker) {
    stop = true;
    during.join();
  }
  if (st == CHORUS_OK) st = chorus_barrier(c.comm);
  // A second communicator needs the store (and fresh listening ports) again.
  chorus_comm* second = nullptr;
  chorus_status st2 = chorus_init_from_env(&second);
  std::string msg2 = second ? "" : oneLine(chorus_last_error(nullptr));
  if (st2 == CHORUS_OK) {
    float x = static_cast<float>(rank + 1);
    st2 = chorus_allreduce(second, &x, &x, 1, CHORUS_F32, CHORUS_SUM);
    if (st2 != CHORUS_OK) msg2 = oneLine(chorus_last_error(second));
    if (st2 == CHORUS_OK && x != static_cast<float>(n * (n + 1) / 2)) ok = false;
  }
  result(c, "second-communicator", st2, "", msg2.c_str());
  if (rank == attacker) {
    say("ATTACK rank=" + std::to_string(rank) + " connections=" + std::to_string(connections) +
        " rounds=" + std::to_string(rounds.load()));
  }
  chorus_destroy(second);
  chorus_destroy(c.comm);
  return st == CHORUS_OK && st2 == CHORUS_OK && ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  alarm(60);                 // never outlive a broken test by much
  signal(SIGTERM, SIG_IGN);  // report even after chorus-run began stopping the job
  const std::string mode = argc > 1 ? argv[1] : "";
  auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };

  if (mode == "garbage") return runGarbage(arg(2, -1));
  if (mode != "correct" && mode != "kill" && mode != "exit-early" && mode != "invalid" &&
      mode.rfind("mismatch-", 0) != 0) {
    say("mp_worker: unknown mode '" + mode + "'");
    return 64;
  }
  Ctx c = init();
  if (mode == "correct") return runCorrect(c);
  if (mode == "kill") {
    return runKill(c, arg(2, 1), arg(3, 16), arg(4, 300), arg(5, 1000),
                   argc > 6 ? argv[6] : "allreduce");
  }
  if (mode == "exit-early") return runExitEarly(c, arg(2, 1), arg(3, 300));
  if (mode == "invalid") return runInvalid(c);
  return runMismatch(c, mode.substr(9), argc > 2 && std::string(argv[2]) == "odd",
                     static_cast<size_t>(arg(3, 1000)), arg(4, 300));
}
