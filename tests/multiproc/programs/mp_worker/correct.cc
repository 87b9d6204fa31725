// mp_worker, mode "correct": every collective checked bit for bit.
#include "modes.h"

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

namespace mpworker {

// ---- correct ----

// The combinations run with the large count: each dtype and op once, both placements.
bool heavyAllReduce(chorus_dtype t, chorus_op op, int inPlace) {
  return (t == CHORUS_DTYPE_F32 && op == CHORUS_OP_SUM && !inPlace) ||
         (t == CHORUS_DTYPE_I32 && op == CHORUS_OP_MAX && inPlace) ||
         (t == CHORUS_DTYPE_F16 && op == CHORUS_OP_AVG && inPlace);
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
  const chorus_dtype dtypes[] = {CHORUS_DTYPE_F32, CHORUS_DTYPE_I32, CHORUS_DTYPE_F16};
  const chorus_op ops[] = {CHORUS_OP_SUM, CHORUS_OP_MAX, CHORUS_OP_AVG};

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
            k.status(name, chorus_all_reduce(c.comm, ptr(in), ptr(in), count, t, op));
            k.same(name, in, want);
            hash.add(in);
          } else {
            std::vector<uint8_t> out(count * es, 0xAB);
            k.status(name, chorus_all_reduce(c.comm, ptr(in), ptr(out), count, t, op));
            k.same(name, out, want);
            k.same(name + "/input-kept", in, original);
            hash.add(out);
          }
        }
      }
    }
    // reduce_scatter: this rank receives block `me` of the reduction of count * n elements.
    const std::pair<chorus_dtype, chorus_op> rsCases[] = {
        {CHORUS_DTYPE_F32, CHORUS_OP_SUM}, {CHORUS_DTYPE_I32, CHORUS_OP_MAX}, {CHORUS_DTYPE_F16, CHORUS_OP_AVG}};
    for (auto [t, op] : rsCases) {
      const size_t es = sizeOf(t);
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        if (heavy && (t != CHORUS_DTYPE_F16 || !inPlace)) continue;
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
    for (chorus_dtype t : {CHORUS_DTYPE_F32, CHORUS_DTYPE_F16}) {
      const size_t es = sizeOf(t);
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        if (heavy && (t != CHORUS_DTYPE_F32 || !inPlace)) continue;
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
      chorus_dtype t = root % 2 ? CHORUS_DTYPE_I32 : CHORUS_DTYPE_F32;
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
    auto a = filled(CHORUS_DTYPE_F32, count, me, n, s0);
    std::vector<uint8_t> aOut(count * 4, 0xAB);
    auto b = filled(CHORUS_DTYPE_I32, count, me, n, s1);
    auto rs = filled(CHORUS_DTYPE_F32, count * N, me, n, s2);
    std::vector<uint8_t> rsOut(count * 4, 0xAB);
    auto ag = filled(CHORUS_DTYPE_I32, count, me, n, s3);
    std::vector<uint8_t> agOut(count * N * 4, 0xAB);
    const int root = n - 1;
    auto bcWant = filled(CHORUS_DTYPE_F32, count, root, n, s4);
    std::vector<uint8_t> bc = me == root ? bcWant : std::vector<uint8_t>(bcWant.size(), 0xAB);

    chorus_request* req[5] = {};
    k.status("iallreduce" + cn,
             chorus_iall_reduce(c.comm, ptr(a), ptr(aOut), count, CHORUS_DTYPE_F32, CHORUS_OP_SUM, &req[0]));
    k.status("iallreduce/inplace" + cn,
             chorus_iall_reduce(c.comm, ptr(b), ptr(b), count, CHORUS_DTYPE_I32, CHORUS_OP_MAX, &req[1]));
    k.status("ireduce_scatter" + cn, chorus_ireduce_scatter(c.comm, ptr(rs), ptr(rsOut), count,
                                                            CHORUS_DTYPE_F32, CHORUS_OP_SUM, &req[2]));
    k.status("iall_gather" + cn,
             chorus_iall_gather(c.comm, ptr(ag), ptr(agOut), count, CHORUS_DTYPE_I32, &req[3]));
    k.status("ibroadcast" + cn,
             chorus_ibroadcast(c.comm, ptr(bc), count, CHORUS_DTYPE_F32, root, &req[4]));
    int done = 0;
    int64_t deadline = monoMs() + 20000;
    while (!done) {
      chorus_status polled = chorus_request_test(req[4], &done);
      if (polled != CHORUS_OK) k.status("test" + cn, polled);
      if (!done && monoMs() > deadline) fatal("chorus_request_test never reported completion" + cn);
      if (!done) usleep(1000);
    }
    for (int i = 0; i < 4; ++i) {  // issue order: the earlier ones are complete too
      int earlier = 0;
      k.status("test" + cn, chorus_request_test(req[i], &earlier));
      if (!earlier) {
        say("WRONG rank=" + std::to_string(me) + " case=test-order" + cn +
            " request=" + std::to_string(i));
        fatal("requests completed out of issue order");
      }
    }
    for (int i = 0; i < 5; ++i) k.status("wait" + cn, chorus_request_wait(req[i]));

    std::vector<uint8_t> want(count * 4);
    for (size_t i = 0; i < count; ++i) store(CHORUS_DTYPE_F32, want.data(), i, n * baseOf(i, s0));
    k.same("iallreduce" + cn, aOut, want);
    for (size_t i = 0; i < count; ++i) {
      store(CHORUS_DTYPE_I32, want.data(), i, reduced(CHORUS_OP_MAX, n, i, s1));
    }
    k.same("iallreduce/inplace" + cn, b, want);
    for (size_t i = 0; i < count; ++i) {
      store(CHORUS_DTYPE_F32, want.data(), i,
            reduced(CHORUS_OP_SUM, n, count * static_cast<size_t>(me) + i, s2));
    }
    k.same("ireduce_scatter" + cn, rsOut, want);
    std::vector<uint8_t> agWant(count * N * 4);
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) {
        store(CHORUS_DTYPE_I32, agWant.data(), count * static_cast<size_t>(r) + i, input(r, n, i, s3));
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
  k.status("all_gather/hash", chorus_all_gather(c.comm, &hash.h, hashes.data(), 8, CHORUS_DTYPE_U8));
  bool identical = true;
  for (uint64_t h : hashes) identical = identical && h == hash.h;
  k.status("barrier/end", chorus_barrier(c.comm));

  char hex[32];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash.h));
  result(c, "correct", CHORUS_OK,
         "ops=" + std::to_string(k.ops()) + " checks=" + std::to_string(k.checks()) +
             " wrong=" + std::to_string(k.wrong()) + " identical=" + (identical ? "1" : "0") +
             " hash=" + hex + " elapsed_ms=" + std::to_string(monoMs() - start));
  chorus_comm_destroy(c.comm);
  return k.wrong() == 0 && identical ? 0 : 2;
}

}  // namespace mpworker
